package runtime

import (
	"errors"

	"github.com/go-sql-driver/mysql"
)

// IsTransient reports whether err is a server error after which the same
// autocommit statement can be retried at once: a deadlock (1213) or a lock
// wait timeout (1205). Both roll the statement back entirely.
func IsTransient(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}
