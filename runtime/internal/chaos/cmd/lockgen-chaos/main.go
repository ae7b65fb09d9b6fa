// Command lockgen-chaos runs lockgen's chaos harness (package chaos):
// worker processes that use every lock and job kind at once while faults
// are injected, then a checker that reads the whole history. It exits 1
// on any violation, and prints the seed that replays the fault plan.
//
//	lockgen-chaos [-duration 3m] [-seed N] [-procs 5] [-restart-cmd CMD] [-race] [-dir DIR]
//	              [-keep-alive 2m] [-strand-bound 30s] [-nodes DSN,DSN,... -node-start-cmd CMD]
//
// The server is LOCKGEN_TEST_DSN (default root@tcp(127.0.0.1:3306)/test),
// used as the admin user that creates the database lockgen_chaos and the
// least-privilege user the workers log in as.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/chaos"
)

func main() {
	dsn := os.Getenv("LOCKGEN_TEST_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/test"
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "lockgen-chaos: CHAOS_SEED %q: not a number\n", s)
			os.Exit(2)
		}
		seed = n
	}
	duration := 3 * time.Minute
	if s := os.Getenv("CHAOS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			fmt.Fprintf(os.Stderr, "lockgen-chaos: CHAOS_DURATION %q: %v\n", s, err)
			os.Exit(2)
		}
		duration = d
	}
	flag.DurationVar(&duration, "duration", duration, "how long to inject faults (CHAOS_DURATION)")
	flag.Uint64Var(&seed, "seed", seed, "the seed of the fault plan (CHAOS_SEED)")
	procs := flag.Int("procs", 5, "worker processes")
	restart := flag.String("restart-cmd", "", "shell command that starts the server again; set, the run restarts the server once")
	race := flag.Bool("race", false, "build the worker with the race detector")
	keepAlive := flag.Duration("keep-alive", chaos.DefaultKeepAlive, "kill the workers' sessions idle this long (the server's TCP keep-alive, which closes sessions a partition stranded)")
	strandBound := flag.Duration("strand-bound", chaos.DefaultStrandBound, "fail on a worker's transaction open longer than this (the runtime's bound on sessions whose client is gone must be below it)")
	dir := flag.String("dir", "", "where to keep the worker, histories and logs (default a temporary directory, removed when the run passes)")
	nodes := flag.String("nodes", "", "comma-separated admin DSNs of a cluster's nodes (LOCKGEN_TEST_DSN one of them): workers spread across them, node faults instead of the server's restart")
	nodeStart := flag.String("node-start-cmd", "", "shell command that starts a cluster's stopped nodes again and waits until they are synced")
	flag.Parse()
	var nodeDSNs []string
	if *nodes != "" {
		nodeDSNs = strings.Split(*nodes, ",")
	}

	keep := *dir != ""
	if !keep {
		d, err := os.MkdirTemp("", "lockgen-chaos-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "lockgen-chaos:", err)
			os.Exit(2)
		}
		*dir = d
	}
	started := time.Now()
	r, err := chaos.Run(context.Background(), chaos.Config{
		AdminDSN: dsn, Procs: *procs, Duration: duration, Seed: seed,
		RestartCmd: *restart, Race: *race, Dir: *dir, Out: os.Stdout,
		KeepAlive: *keepAlive, StrandBound: *strandBound,
		Nodes: nodeDSNs, NodeStartCmd: *nodeStart,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockgen-chaos:", err)
		fmt.Fprintln(os.Stderr, "lockgen-chaos: files in", *dir)
		os.Exit(2)
	}
	keys := make([]string, 0, len(r.Counts))
	for k := range r.Counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Printf("chaos: seed %d, %s in all\n", seed, time.Since(started).Round(time.Second))
	for _, k := range keys {
		fmt.Printf("  %-40s %d\n", k, r.Counts[k])
	}
	fmt.Printf("chaos: %d violations\n", len(r.Violations))
	for _, v := range r.Violations {
		fmt.Println("  VIOLATION:", v)
	}
	if len(r.Violations) > 0 {
		fmt.Printf("chaos: FAIL (replay the faults with CHAOS_SEED=%d; files in %s)\n", seed, *dir)
		os.Exit(1)
	}
	if !keep {
		_ = os.RemoveAll(*dir)
	}
	fmt.Println("chaos: PASS")
}
