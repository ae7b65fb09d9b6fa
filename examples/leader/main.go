// Command leader runs several nodes (each with its own *sql.DB pool) that
// elect one "scheduler" leader with the generated RunAsScheduler. The
// leader does leader-only work in a loop; every term ends after a few
// ticks (standing for a deploy) so another node takes over, each term with
// a higher fencing token. Metrics (lockgen_leader, acquisitions, …) are
// served on -listen at /metrics.
//
// It applies the migration as the admin, LOCKGEN_DSN (default
// root@tcp(127.0.0.1:3306)/test); the nodes connect as a user that has
// SELECT, INSERT, UPDATE, DELETE on the lock table only: LOCKGEN_APP_DSN, or
// a user created for the run and dropped after.
package main

//go:generate go run github.com/lockgen/lockgen/cmd/lockgen generate

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lockgen/lockgen/examples/internal/demodb"
	"github.com/lockgen/lockgen/examples/leader/locks"
	"github.com/lockgen/lockgen/lockgenprom"
)

//go:embed migrations/0001_leaderdemo_locks.up.sql
var migration string

func main() {
	nodes := flag.Int("nodes", 3, "number of nodes")
	terms := flag.Int("terms", 6, "leadership terms to run before stopping")
	listen := flag.String("listen", "127.0.0.1:9464", "address serving /metrics (empty: none)")
	flag.Parse()
	reg := prometheus.NewRegistry()
	if *listen != "" {
		go func() {
			http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
			fmt.Fprintln(os.Stderr, "metrics on http://"+*listen+"/metrics")
			if err := http.ListenAndServe(*listen, nil); err != nil {
				fmt.Fprintln(os.Stderr, "leader: metrics:", err)
			}
		}()
	}
	if err := run(context.Background(), demodb.FromEnv(), *nodes, *terms, reg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "leader:", err)
		os.Exit(1)
	}
}

// run starts the nodes and stops them after the given number of terms.
// Every line it prints to out is a term's start or end with its token.
// The migration runs as dsns.Admin, the nodes as the application's user.
func run(ctx context.Context, dsns demodb.DSNs, nodes, terms int, reg prometheus.Registerer, out io.Writer) error {
	env, err := demodb.Setup(ctx, dsns, []string{"leaderdemo_locks"}, migration)
	if err != nil {
		return fmt.Errorf("set up the database: %w", err)
	}
	defer env.Close()
	fmt.Fprintf(out, "nodes connect as %s\n", env.User)
	cfg := env.App

	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var mu sync.Mutex // orders the log and counts terms
	started := 0
	var wg sync.WaitGroup
	errs := make(chan error, nodes)
	for i := 1; i <= nodes; i++ {
		db, err := demodb.Open(cfg)
		if err != nil {
			return err
		}
		defer db.Close()
		name := fmt.Sprintf("node-%d", i)
		obs := lockgenprom.New(lockgenprom.WithConstLabels(prometheus.Labels{"node": name}))
		if err := reg.Register(obs); err != nil {
			return err
		}
		l, err := locks.New(db, locks.WithOwner(name), locks.WithObserver(obs))
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- l.RunAsScheduler(ctx, func(ctx context.Context, lease *locks.Lease) error {
				mu.Lock()
				started++
				last := started >= terms
				fmt.Fprintf(out, "%s leads      token=%d\n", name, lease.Token())
				mu.Unlock()
				if last {
					stop() // enough terms: every node stops campaigning
				}
				ticker := time.NewTicker(100 * time.Millisecond)
				defer ticker.Stop()
				for tick := 0; tick < 3; tick++ { // leader-only work
					select {
					case <-ticker.C:
					case <-ctx.Done():
						return logEnd(&mu, out, name, lease, context.Cause(ctx))
					}
				}
				return logEnd(&mu, out, name, lease, nil) // step down (a deploy)
			})
		}()
	}
	wg.Wait()
	close(errs)
	var all error
	for err := range errs {
		all = errors.Join(all, err)
	}
	return all
}

func logEnd(mu *sync.Mutex, out io.Writer, name string, lease *locks.Lease, cause error) error {
	mu.Lock()
	defer mu.Unlock()
	why := "stepped down"
	if errors.Is(cause, locks.ErrLeaseLost) {
		why = "lost the lease"
	} else if cause != nil {
		why = "stopped"
	}
	fmt.Fprintf(out, "%s %-14s token=%d\n", name, why, lease.Token())
	return nil
}
