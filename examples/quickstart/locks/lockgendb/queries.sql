-- name: LeaseAcquire :execresult
-- LeaseAcquire takes the lock row when it is missing, released or expired by
-- the database clock, in one autocommit statement. The new fencing token
-- comes back as the result's LastInsertId: GREATEST(previous token + 1, the
-- database clock in microseconds since 1970), and the clock for a new row.
-- The clock term keeps tokens rising past a pruned row (a row gets at most
-- one acquisition per microsecond) and past a row-strategy holding whose
-- token bump was rolled back (see RowTake). LastInsertId is 0 when the row
-- is held by someone else, and 1 (never a token: tokens start at the clock)
-- when it shows a session holding (the far-future expiry), which
-- LeaseTakeover takes if that holding's server-side lock is free. The
-- assignments test expires_at before it is overwritten (MySQL applies ON
-- DUPLICATE KEY UPDATE assignments left to right). They repeat the inserted
-- values instead of reading VALUES(col), which MySQL 8.0.20+ deprecates
-- with a warning on every execution (its replacement, the row alias, is a
-- syntax error on MariaDB). The session-holding test is a separate
-- statement because it costs: with it in every acquire, acquire and
-- release pairs ran 17-25% slower on MariaDB.
INSERT INTO quickstart_locks (name, lock_key, owner, token, acquired_at, expires_at)
VALUES (
    sqlc.arg(name), sqlc.arg(lock_key), sqlc.arg(owner), LAST_INSERT_ID(CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)) AS SIGNED)), (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND),
    (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND) + INTERVAL CAST(sqlc.arg(ttl_us) AS SIGNED) MICROSECOND
)
ON DUPLICATE KEY UPDATE
    token       = IF(expires_at <= (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND), LAST_INSERT_ID(GREATEST(token + 1, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)) AS SIGNED))), IF(expires_at = '9999-12-31 23:59:59', token + LAST_INSERT_ID(1) - 1, token + LAST_INSERT_ID(0))),
    owner       = IF(expires_at <= (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND), sqlc.arg(owner), owner),
    acquired_at = IF(expires_at <= (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND), (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND), acquired_at),
    expires_at  = IF(expires_at <= (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND), (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND) + INTERVAL CAST(sqlc.arg(ttl_us) AS SIGNED) MICROSECOND, expires_at);

-- name: LeaseTakeover :execresult
-- LeaseTakeover is LeaseAcquire for a row that showed a session holding: it
-- also takes a row marked by a session holding whose server-side lock is
-- free (its holder died, or its release failed half-way), so a crashed
-- session holder cannot wedge the lock for lease nodes (as during a rolling
-- change of strategy). session_lock is that holding's GET_LOCK name, as the
-- runtime computes it. LastInsertId is the new token, or 0.
-- MySQL applies ON DUPLICATE KEY UPDATE assignments left to right, each
-- seeing the ones before: the first decides once (IS_FREE_LOCK could
-- change between evaluations) and marks a taken row with the expiry
-- 1000-01-01, which the others test and the last overwrites; the mark
-- never outlives the statement.
INSERT INTO quickstart_locks (name, lock_key, owner, token, acquired_at, expires_at)
VALUES (
    sqlc.arg(name), sqlc.arg(lock_key), sqlc.arg(owner), LAST_INSERT_ID(CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)) AS SIGNED)), (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND),
    (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND) + INTERVAL CAST(sqlc.arg(ttl_us) AS SIGNED) MICROSECOND
)
ON DUPLICATE KEY UPDATE
    expires_at  = IF((expires_at <= (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND) OR (expires_at = '9999-12-31 23:59:59' AND IS_FREE_LOCK(sqlc.arg(session_lock)) = 1)), '1000-01-01 00:00:00', expires_at),
    token       = IF(expires_at = '1000-01-01 00:00:00', LAST_INSERT_ID(GREATEST(token + 1, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)) AS SIGNED))), token + LAST_INSERT_ID(0)),
    owner       = IF(expires_at = '1000-01-01 00:00:00', sqlc.arg(owner), owner),
    acquired_at = IF(expires_at = '1000-01-01 00:00:00', (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND), acquired_at),
    expires_at  = IF(expires_at = '1000-01-01 00:00:00', (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND) + INTERVAL CAST(sqlc.arg(ttl_us) AS SIGNED) MICROSECOND, expires_at);

-- name: LeaseRenew :execrows
-- LeaseRenew extends a lease that is still held by this owner and token and
-- has not expired by the database clock. 0 rows: the lease is not held, or
-- a renewal that started later already set a later expiry. The expiry
-- never moves back: a renewal whose statement started, stalled on the
-- server (a row lock, a starved thread) and wrote after a later one
-- would otherwise cut the expiry that later one gave the holder's deadline.
UPDATE quickstart_locks
SET expires_at = GREATEST(expires_at, (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND) + INTERVAL CAST(sqlc.arg(ttl_us) AS SIGNED) MICROSECOND)
WHERE name = sqlc.arg(name) AND lock_key = sqlc.arg(lock_key)
  AND owner = sqlc.arg(owner) AND token = sqlc.arg(token)
  AND expires_at > (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND);

-- name: LeaseRelease :execrows
-- LeaseRelease frees a lease held by this owner and token; it never touches a
-- row that another holder has taken since. 0 rows: not held by this holder.
UPDATE quickstart_locks
SET owner = '', expires_at = LEAST(expires_at, (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND))
WHERE name = sqlc.arg(name) AND lock_key = sqlc.arg(lock_key)
  AND owner = sqlc.arg(owner) AND token = sqlc.arg(token);

-- name: LeaseGet :one
-- LeaseGet reads the lock row with the time left on it by the database clock
-- (negative or zero when expired or released).
SELECT name, lock_key, owner, token, acquired_at, expires_at,
       CAST(TIMESTAMPDIFF(MICROSECOND, (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND), expires_at) AS SIGNED) AS remaining_us
FROM quickstart_locks
WHERE name = sqlc.arg(name) AND lock_key = sqlc.arg(lock_key);

-- name: LeaseGuard :one
-- LeaseGuard runs inside the caller's own transaction. It returns the token
-- when the holding (owner, token) is still current and unexpired by the
-- database clock, and then keeps a shared lock on the row until that
-- transaction ends: nobody can acquire the lock before the caller's writes
-- commit (and the holder's own renewals wait for it too). No row: the
-- holding is over.
SELECT token
FROM quickstart_locks
WHERE name = sqlc.arg(name) AND lock_key = sqlc.arg(lock_key)
  AND owner = sqlc.arg(owner) AND token = sqlc.arg(token)
  AND expires_at > (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)
LOCK IN SHARE MODE;

-- name: LeaseRenewMany :execrows
-- LeaseRenewMany renews, in one statement, every listed holding of lock
-- name by owner: key_tokens pairs each key with its holding's token as
-- "<key>:<token>" (tokens are digits, so the pair is unambiguous), so each
-- row is renewed only by its own holding, and only while unexpired.
-- lock_keys lets the primary key narrow the scan. The count is how many
-- were renewed; LeaseGetMany tells which. Like LeaseRenew, it never moves
-- an expiry back.
UPDATE quickstart_locks
SET expires_at = GREATEST(expires_at, (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND) + INTERVAL CAST(sqlc.arg(ttl_us) AS SIGNED) MICROSECOND)
WHERE name = sqlc.arg(name) AND owner = sqlc.arg(owner)
  AND lock_key IN (sqlc.slice(lock_keys))
  AND holding IN (sqlc.slice(holdings))
  AND expires_at > (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND);

-- name: LeaseGetMany :many
-- LeaseGetMany reads the listed rows of lock name, with the time left on
-- each by the database clock.
SELECT lock_key, owner, token,
       CAST(TIMESTAMPDIFF(MICROSECOND, (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND), expires_at) AS SIGNED) AS remaining_us
FROM quickstart_locks
WHERE name = sqlc.arg(name) AND lock_key IN (sqlc.slice(lock_keys));

-- name: LeasePrunable :many
-- LeasePrunable locks, in the prune's READ COMMITTED transaction, up to
-- row_limit rows of keyed lock name that have been free (released or
-- expired) for longer than older_than_us microseconds by the database
-- clock and whose token, the newest the row issued, is more than
-- older_than_us below the clock in microseconds; the store's LeasePrune
-- then deletes them (driver.DeleteKeys). The token test matters because a fresh row's token is the clock at
-- its statement's start: an acquisition that waited in the row lock queue
-- carries a clock from before its wait, and must find the row (and
-- GREATEST(token + 1, ...)) if any holding it did not see was issued less
-- than older_than_us ago; it also keeps a committed row-strategy holding,
-- whose expires_at is a 1970 sentinel, and a row whose token is ahead of a
-- clock that stepped back. A held row never matches: the test reads the
-- newest committed row under its row lock. SKIP LOCKED passes a row that
-- another transaction holds (a row holding, an acquisition in flight, an
-- operator's SELECT … FOR UPDATE) instead of waiting for it: a DELETE
-- that searched the range itself (REPEATABLE READ) waited on such a row
-- for the lock wait timeout with the keys it had read locked, stopping
-- their acquisitions and every new key's. The caller keeps older_than_us
-- at least the TTL, longer than any acquisition whose token is used may
-- take (see Prune).
SELECT lock_key
FROM quickstart_locks
WHERE name = sqlc.arg(name) AND lock_key <> ''
  AND expires_at < (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND) - INTERVAL CAST(sqlc.arg(older_than_us) AS SIGNED) MICROSECOND
  AND token < CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)) AS SIGNED) - CAST(sqlc.arg(older_than_us) AS SIGNED)
LIMIT ?
FOR UPDATE SKIP LOCKED;

-- name: SessionGetLock :one
-- SessionGetLock waits up to timeout_us microseconds, on the server, for the
-- named session lock (GET_LOCK). 1: acquired by this connection; 0: timed
-- out; -1: error (killed, or refused).
SELECT CAST(IFNULL(GET_LOCK(sqlc.arg(lock_name), sqlc.arg(timeout_us) / 1000000), -1) AS SIGNED) AS acquired;

-- name: SessionHoldsLock :one
-- SessionHoldsLock is 1 when this connection holds the named session lock.
SELECT CAST(IFNULL(IS_USED_LOCK(sqlc.arg(lock_name)) = CONNECTION_ID(), 0) AS SIGNED) AS held;

-- name: SessionIsUsed :one
-- SessionIsUsed is 1 when any connection holds the named session lock.
SELECT CAST(IS_USED_LOCK(sqlc.arg(lock_name)) IS NOT NULL AS SIGNED) AS used;

-- name: SessionReleaseLock :one
-- SessionReleaseLock releases the named session lock held by this
-- connection. 1: released; 0: held by another connection; -1: not held.
SELECT CAST(IFNULL(RELEASE_LOCK(sqlc.arg(lock_name)), -1) AS SIGNED) AS released;

-- name: SessionTokenRead :one
-- SessionTokenRead is the cheaper first try of a session holding whose
-- owner's previous holding of the same lock row took its token from the
-- row's reservation: run right after GET_LOCK succeeded, on the same
-- connection, it reads whether that connection holds the named session
-- lock lock_name (held), the row's token, owner, whether its reservation
-- is armed (it shows a session holding and its witness GET_LOCK is held)
-- and next_token, its session_offset plus UUID_SHORT() drawn now
-- (docs/strategies.md, "Session tokens without a write"). No row when
-- the lock row does not exist. FOR UPDATE reads the newest committed row
-- and waits for a transaction that holds it (a Guard's shared lock, a
-- lease or row acquirer taking the row over), so nothing that transaction
-- decides is missed; in autocommit it keeps no lock after the statement.
-- It writes nothing: when the reservation does not allow the token,
-- SessionToken follows.
SELECT CAST(IFNULL(IS_USED_LOCK(sqlc.arg(lock_name)) = CONNECTION_ID(), 0) AS SIGNED) AS held,
       token,
       owner,
       CAST((expires_at = '9999-12-31 23:59:59' AND CASE WHEN session_witness = '' THEN 0 ELSE IS_USED_LOCK(session_witness) IS NOT NULL END) AS SIGNED) AS armed,
       CAST(session_offset + CAST(UUID_SHORT() & 72057594037927935 AS SIGNED) AS SIGNED) AS next_token
FROM quickstart_locks
WHERE name = sqlc.arg(name) AND lock_key = sqlc.arg(lock_key)
FOR UPDATE;

-- name: SessionTryReserved :one
-- SessionTryReserved is SessionGetLock without waiting and SessionTokenRead
-- in one statement, for a session holding tried (no wait) on a connection
-- kept from an earlier holding, whose session is bounded already: it reads
-- and write-locks the lock row, then takes the named session lock
-- lock_name with GET_LOCK(lock_name, 0) (got: 1 acquired, 0 held by
-- another connection, -1 error), then reads whether the connection holds
-- it (held) and, only then, draws next_token, the reservation's next token
-- (0 when the connection does not hold the lock); token, owner and armed
-- are SessionTokenRead's. Each column decides on its own, so no order of
-- evaluation of the columns can pair a held lock with a token drawn before
-- it was taken. The row lock is held until the statement ends, past the
-- moment GET_LOCK is granted, so no writer of the row (a lease or row
-- acquirer taking a session-marked row over once IS_FREE_LOCK says free,
-- Prune) can change it between the read and the grant. NOWAIT: a row
-- locked by a transaction (a Guard's, an acquirer's) fails the statement
-- at once, before GET_LOCK runs (MySQL 3572, MariaDB 1205), instead of
-- making a try wait; a missing row answers no row, GET_LOCK not run
-- either. The runtime then takes the longer way (GET_LOCK first), on a
-- new connection.
SELECT CAST(IFNULL(GET_LOCK(sqlc.arg(lock_name), 0), -1) AS SIGNED) AS got,
       CAST(IFNULL(IS_USED_LOCK(sqlc.arg(lock_name)) = CONNECTION_ID(), 0) AS SIGNED) AS held,
       token,
       owner,
       CAST((expires_at = '9999-12-31 23:59:59' AND CASE WHEN session_witness = '' THEN 0 ELSE IS_USED_LOCK(session_witness) IS NOT NULL END) AS SIGNED) AS armed,
       CAST(IF(IS_USED_LOCK(sqlc.arg(lock_name)) <=> CONNECTION_ID(), session_offset + CAST(UUID_SHORT() & 72057594037927935 AS SIGNED), 0) AS SIGNED) AS next_token
FROM quickstart_locks
WHERE name = sqlc.arg(name) AND lock_key = sqlc.arg(lock_key)
FOR UPDATE NOWAIT;

-- name: SessionToken :execresult
-- SessionToken issues a session holding's fencing token (the result's
-- LastInsertId; no row affected when the token came from the row's
-- reservation), run right after GET_LOCK succeeded, on the same
-- connection, and only while that connection holds the named session lock
-- lock_name (IS_USED_LOCK): otherwise it changes nothing and LastInsertId
-- is 0. GET_LOCK excludes other session holders; the row itself is taken
-- only when it is free or marked by a session holding (expires_at is the
-- far-future marker, which a session holding leaves when it ends: the
-- server-side lock says whether it is held), never from a live lease of
-- the same lock (as during a rolling change of strategy): then
-- LastInsertId is 0 too. The row stays "unexpired" while the holding
-- lasts.
-- When the row's reservation allows (docs/strategies.md, "Session tokens
-- without a write": the row is marked by a session holding of this owner,
-- its witness GET_LOCK is held, and session_offset + UUID_SHORT() has not
-- passed the row's token), the token is session_offset + UUID_SHORT() and
-- the row is left as it is: the statement writes nothing, so its commit
-- costs no log flush. Otherwise it writes the token GREATEST(token + 2,
-- the database clock in µs) (+ 2, not + 1, so that it also passes a
-- row-strategy holding that took the row over, GREATEST(token + 1, ...),
-- and was rolled back, whatever the clock did) and arms a reservation:
-- session_offset makes session_offset + UUID_SHORT() the token plus the
-- UUID_SHORT() calls made since, session_witness names this connection's
-- witness GET_LOCK (@lockgen_witness, taken by the acquire's first
-- statement; '' when the connection does not hold it, which leaves the
-- reservation unarmed), and the row's token becomes the token plus
-- reserve, the bound no token of the reservation passes; only when the row
-- was already this owner's (a first holding, or a lock changing hands,
-- reserves nothing and spends no tokens). Owners are compared as bytes
-- (owner_bytes is owner), so no connection character set can make the
-- comparison fail.
-- MySQL applies ON DUPLICATE KEY UPDATE assignments left to right, each
-- seeing the ones before: the first decides once, drawing UUID_SHORT()
-- once (LAST_INSERT_ID(next) both compares and returns it), and marks the
-- row's expiry 1000-01-03 (the reservation issues the token) or
-- 1000-01-01 (write), which the others test and the last overwrites; the
-- marks never outlive the statement.
INSERT INTO quickstart_locks (name, lock_key, owner, token, acquired_at, expires_at, session_witness, session_offset)
SELECT sqlc.arg(name), sqlc.arg(lock_key), sqlc.arg(owner), LAST_INSERT_ID(CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)) AS SIGNED)), (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND), '9999-12-31 23:59:59',
    CASE WHEN IFNULL(@lockgen_witness, '') = '' THEN '' WHEN IS_USED_LOCK(@lockgen_witness) <=> CONNECTION_ID() THEN @lockgen_witness ELSE '' END, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)) AS SIGNED) - CAST(UUID_SHORT() & 72057594037927935 AS SIGNED)
FROM DUAL
WHERE IS_USED_LOCK(sqlc.arg(lock_name)) = CONNECTION_ID()
ON DUPLICATE KEY UPDATE
    expires_at      = IF((expires_at = '9999-12-31 23:59:59' AND CASE WHEN session_witness = '' THEN 0 ELSE IS_USED_LOCK(session_witness) IS NOT NULL END) AND CAST(owner AS BINARY) = CAST(sqlc.arg(owner_bytes) AS BINARY)
                            AND LAST_INSERT_ID(session_offset + CAST(UUID_SHORT() & 72057594037927935 AS SIGNED)) <= token, '1000-01-03 00:00:00',
                         IF(expires_at <= (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND) OR expires_at = '9999-12-31 23:59:59', '1000-01-01 00:00:00', expires_at)),
    session_offset  = IF(expires_at = '1000-01-01 00:00:00', GREATEST(token + 2, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)) AS SIGNED)) - CAST(UUID_SHORT() & 72057594037927935 AS SIGNED), session_offset),
    session_witness = IF(expires_at = '1000-01-01 00:00:00', CASE WHEN IFNULL(@lockgen_witness, '') = '' THEN '' WHEN IS_USED_LOCK(@lockgen_witness) <=> CONNECTION_ID() THEN @lockgen_witness ELSE '' END, session_witness),
    token           = IF(expires_at = '1000-01-01 00:00:00',
                         LAST_INSERT_ID(GREATEST(token + 2, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)) AS SIGNED))) + IF(CAST(owner AS BINARY) = CAST(sqlc.arg(owner_bytes) AS BINARY), sqlc.arg(reserve), 0),
                         IF(expires_at = '1000-01-03 00:00:00', token, token + LAST_INSERT_ID(0))),
    owner           = IF(expires_at = '1000-01-01 00:00:00', sqlc.arg(owner), owner),
    acquired_at     = IF(expires_at = '1000-01-01 00:00:00', (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND), acquired_at),
    expires_at      = IF(expires_at IN ('1000-01-01 00:00:00', '1000-01-03 00:00:00'), '9999-12-31 23:59:59', expires_at);

-- name: SessionGuard :one
-- SessionGuard is LeaseGuard for a session holding, inside the caller's
-- own transaction: a row when the holding is still current, which then
-- stays share-locked until that transaction ends, so no acquisition of
-- any strategy (each writes or locks the row) completes before it does.
-- Holdings whose tokens came from one reservation leave the row as it
-- was, so the holding is its connection instead: conn_id still holds the
-- session lock lock_name and the witness GET_LOCK named witness (that
-- connection's). A lost holding ended its connection; a connection id can
-- come back after a server restart, but its witness, 128 random bits, does
-- not. The connection checks are columns, not WHERE conditions: they
-- name no column, so the server would evaluate them as constants before
-- it reads and share-locks the row (MariaDB's EXPLAIN says "Impossible
-- WHERE"), and a holding lost in between would pass. As columns they are
-- evaluated once the row is locked, and the store reads them.
SELECT token,
       CAST(IFNULL(IS_USED_LOCK(sqlc.arg(lock_name)) = CAST(sqlc.arg(conn_id) AS SIGNED), 0) AS SIGNED) AS held,
       CAST(CASE WHEN sqlc.arg(witness) = '' THEN 0 ELSE IFNULL(IS_USED_LOCK(sqlc.arg(witness)) = CAST(sqlc.arg(conn_id) AS SIGNED), 0) END AS SIGNED) AS witnessed
FROM quickstart_locks
WHERE name = sqlc.arg(name) AND lock_key = sqlc.arg(lock_key)
  AND owner = sqlc.arg(owner) AND expires_at = '9999-12-31 23:59:59'
LOCK IN SHARE MODE;

-- name: SessionDisarm :exec
-- SessionDisarm ends the reservation of a row that shows a session
-- holding, durably (autocommit), before a row-strategy acquirer takes the
-- row over: that holding's transaction may be rolled back, and a
-- reservation still armed would then issue tokens below its token.
UPDATE quickstart_locks
SET session_witness = ''
WHERE name = sqlc.arg(name) AND lock_key = sqlc.arg(lock_key) AND session_witness <> '';

-- name: RowLockNowait :one
-- RowLockNowait locks the lock row FOR UPDATE inside a row-strategy
-- holding's transaction without waiting: a row locked by another holding
-- fails at once with the server's lock-wait error. No row: nothing locked
-- (the transaction is READ COMMITTED, so no gap lock either).
SELECT token
FROM quickstart_locks
WHERE name = sqlc.arg(name) AND lock_key = sqlc.arg(lock_key)
FOR UPDATE NOWAIT;

-- name: RowLock :exec
-- RowLock runs inside a row-strategy holding's transaction: it creates the
-- lock row (free, uncommitted) or waits, up to innodb_lock_wait_timeout,
-- for its exclusive row lock. It changes nothing in an existing row.
INSERT INTO quickstart_locks (name, lock_key, owner, token, acquired_at, expires_at)
VALUES (sqlc.arg(name), sqlc.arg(lock_key), '', CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)) AS SIGNED), (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND), '1970-01-01 00:00:01')
ON DUPLICATE KEY UPDATE token = token;

-- name: RowTake :execresult
-- RowTake runs inside a row-strategy holding's transaction after its row
-- lock was granted, and records the holding (uncommitted until the
-- release). The fencing token (the result's LastInsertId) is
-- GREATEST(token + 1, the database clock in µs at this statement): a holder
-- whose transaction is rolled back (it crashed) loses its token bump, but
-- this statement starts after that holder's bump, so the next holding still
-- gets a greater token. A committed live lease of the same lock (a node
-- still running the lease strategy) is never taken: LastInsertId is then 0;
-- for a row that shows a session holding it is 1 (never a token), and
-- RowTakeover takes the row if that holding's server-side lock is free (see
-- LeaseAcquire and LeaseTakeover).
-- The holding's expiry is the row sentinel 1970-01-01 00:00:02, in the
-- past: the row lock alone excludes others, and a holding committed by
-- mistake (fn committing the transaction itself) looks free, never held
-- forever, and is not taken for a session holding.
INSERT INTO quickstart_locks (name, lock_key, owner, token, acquired_at, expires_at)
VALUES (sqlc.arg(name), sqlc.arg(lock_key), sqlc.arg(owner), LAST_INSERT_ID(CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)) AS SIGNED)), (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND), '1970-01-01 00:00:02')
ON DUPLICATE KEY UPDATE
    token       = IF(expires_at <= (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND), LAST_INSERT_ID(GREATEST(token + 1, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)) AS SIGNED))), IF(expires_at = '9999-12-31 23:59:59', token + LAST_INSERT_ID(1) - 1, token + LAST_INSERT_ID(0))),
    owner       = IF(expires_at <= (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND), sqlc.arg(owner), owner),
    acquired_at = IF(expires_at <= (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND), (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND), acquired_at),
    expires_at  = IF(expires_at <= (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND), '1970-01-01 00:00:02', expires_at);

-- name: RowTakeover :execresult
-- RowTakeover is RowTake for a row that showed a session holding: it also
-- takes a row marked by a session holding whose server-side lock (named
-- session_lock) is free (see LeaseTakeover, which also explains the
-- 1000-01-01 mark). A takeable row whose session reservation is still
-- armed is not taken: LastInsertId is then 2 (driver.SessionArmed), and
-- the runtime disarms it durably (SessionDisarm) before it tries again,
-- since this holding may be rolled back and would otherwise leave the
-- reservation armed below its token (its 1000-01-02 mark never outlives
-- the statement either).
INSERT INTO quickstart_locks (name, lock_key, owner, token, acquired_at, expires_at)
VALUES (sqlc.arg(name), sqlc.arg(lock_key), sqlc.arg(owner), LAST_INSERT_ID(CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)) AS SIGNED)), (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND), '1970-01-01 00:00:02')
ON DUPLICATE KEY UPDATE
    expires_at  = IF((expires_at <= (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND) OR (expires_at = '9999-12-31 23:59:59' AND IS_FREE_LOCK(sqlc.arg(session_lock)) = 1)), IF((expires_at = '9999-12-31 23:59:59' AND CASE WHEN session_witness = '' THEN 0 ELSE IS_USED_LOCK(session_witness) IS NOT NULL END), '1000-01-02 00:00:00', '1000-01-01 00:00:00'), expires_at),
    token       = IF(expires_at = '1000-01-01 00:00:00', LAST_INSERT_ID(GREATEST(token + 1, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)) AS SIGNED))),
                     IF(expires_at = '1000-01-02 00:00:00', token + LAST_INSERT_ID(2) - 2, token + LAST_INSERT_ID(0))),
    owner       = IF(expires_at = '1000-01-01 00:00:00', sqlc.arg(owner), owner),
    acquired_at = IF(expires_at = '1000-01-01 00:00:00', (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND), acquired_at),
    expires_at  = IF(expires_at = '1000-01-01 00:00:00', '1970-01-01 00:00:02',
                     IF(expires_at = '1000-01-02 00:00:00', '9999-12-31 23:59:59', expires_at));

-- name: RowHolds :one
-- RowHolds runs inside a row-strategy holding's own transaction: a row
-- when that holding (owner, token) is still in force there; none when the
-- server rolled the transaction back (a deadlock, a killed connection).
SELECT token
FROM quickstart_locks
WHERE name = sqlc.arg(name) AND lock_key = sqlc.arg(lock_key)
  AND owner = sqlc.arg(owner) AND token = sqlc.arg(token)
  AND expires_at = '1970-01-01 00:00:02';

-- name: ServerGalera :one
-- ServerGalera is 1 on a Galera cluster node (wsrep_on), where GET_LOCK and
-- SELECT ... FOR UPDATE are not cluster-wide. MySQL has no such variable and
-- fails with error 1193, which means "not Galera".
SELECT CAST(IFNULL(@@global.wsrep_on, 0) AS SIGNED) AS galera;

-- Code generated by lockgen. DO NOT EDIT.
-- (This line ends the file: sqlc would take a first line as the first query's doc comment.)
