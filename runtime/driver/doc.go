// Package driver is the contract between the lockgen runtime and the store
// code that lockgen generates for an application: the Store and JobStore
// interfaces, the rows they exchange, and the few statements that are the
// same for every table prefix (the multi-row run insert, the row strategy's
// connection handling, the claim transaction).
//
// It is for generated code and the runtime's tests; it is not a stable API.
// Applications use their generated package and, for what it does not
// re-export, package runtime.
//
// # What a store guarantees
//
// Implementations map parameters and results; the decisions are the
// runtime's. Every method of Store except RowBegin and SessionConn runs one
// autocommit statement on the pool, never inside a caller's transaction
// (LeaseGuard runs in the transaction it is given, by design). Every
// statement that changes a lock row matches its owner and fencing token, so
// nobody renews or frees a holding that is not theirs. Every statement that
// changes a running run matches its claim. Times are sent in UTC and expiry
// is decided by the database clock (UTC_TIMESTAMP(6)).
//
// The generated store asserts at compile time that it implements Store (and
// JobStore when jobs are declared), so a missing method is a build error,
// not a runtime one. The package drivertest checks any implementation
// against the behaviour described here.
package driver
