package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/lockgen/lockgen/lockgenapi"
)

// serveCommand is `lockgen serve`: the HTTP/JSON API of package lockgenapi
// on its own.
func serveCommand() *command {
	return &command{
		name:    "serve",
		args:    "[-addr 127.0.0.1:8080] [-dsn DSN] [-f lockgen.yaml] [-write-token TOKEN]",
		summary: "serve the dashboard and the HTTP/JSON API for operators and other languages",
		doc: `Serve answers the dashboard at / (overview, locks, runs, a run's history,
schedules; pause, resume, cancel and retry with the write token) and the
HTTP/JSON API under /api/v1 (status, locks, queues,
runs; pause, resume, push, cancel, retry; consume: claim, heartbeat,
complete, fail) for the deployment that lockgen.yaml (-f; default: the
lockgen.yaml here or in the nearest directory above) and the DSN (-dsn,
default $LOCKGEN_DSN) name, until SIGINT or SIGTERM. Consumers over HTTP
get the Go workers' guarantees: their runs are leased, and the runs of a
consumer that stops heartbeating are rescued (by serve's claims, and by
any Go worker).

It is read-only unless given a write token (-write-token, default
$LOCKGEN_WRITE_TOKEN): every write then needs the header
"Authorization: Bearer <token>". It prints "listening on http://ADDR" on
stderr once it accepts connections (with -addr 127.0.0.1:0, the port the
system chose). Keep it behind your network's access control: reads are
open to whoever reaches it.` + "\n\nExit status 0 after a signal, 1 when it cannot listen or start, 2 on bad input.",
		setup: func(fs *flag.FlagSet) runFunc {
			t := opsFlags(fs)
			addr := fs.String("addr", "127.0.0.1:8080", "the `address` to listen on")
			token := fs.String("write-token", os.Getenv("LOCKGEN_WRITE_TOKEN"), "allow writes that carry this bearer `token` (default $LOCKGEN_WRITE_TOKEN)")
			return func(ctx context.Context, out *streams, _ []string) int {
				o, closeDB, code := t.open(out, "serve")
				if o == nil {
					return code
				}
				defer closeDB()
				ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
				ln, err := net.Listen("tcp", *addr)
				if err != nil {
					fmt.Fprintf(out.stderr, "lockgen serve: %v\n", err)
					return exitFail
				}
				log := slog.New(slog.NewTextHandler(out.stderr, nil))
				srv := &http.Server{
					Handler:           lockgenapi.New(o, lockgenapi.Options{WriteToken: *token, Logger: log}),
					ReadHeaderTimeout: 10 * time.Second,
					ReadTimeout:       30 * time.Second,
					WriteTimeout:      60 * time.Second,
					IdleTimeout:       2 * time.Minute,
				}
				srv.RegisterOnShutdown(o.StopWaiting) // long polls answer at once
				mode := "read-only"
				if *token != "" {
					mode = "writes need the write token"
				}
				fmt.Fprintf(out.stderr, "lockgen serve: listening on http://%s (%s)\n", ln.Addr(), mode)
				done := make(chan error, 1)
				go func() { done <- srv.Serve(ln) }()
				select {
				case err := <-done:
					fmt.Fprintf(out.stderr, "lockgen serve: %v\n", err)
					return exitFail
				case <-ctx.Done():
				}
				shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
					fmt.Fprintf(out.stderr, "lockgen serve: shutdown: %v\n", err)
				}
				fmt.Fprintln(out.stderr, "lockgen serve: stopped")
				return exitOK
			}
		},
	}
}
