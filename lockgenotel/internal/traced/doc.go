// Package traced holds the deployment lockgenotel's tests trace: app/ is
// the code lockgen generates from lockgen.yaml, migrations/ its
// migrations.
package traced

//go:generate go run github.com/lockgen/lockgen/cmd/lockgen generate
