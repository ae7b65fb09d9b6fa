package lockgenapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgen/lockgen/lockgenapi"
	"github.com/lockgen/lockgen/runtime/ops"
)

// BenchmarkPushTable prints the runs per second enqueued over HTTP (one run
// per request, 8 clients on kept-alive connections) beside ops.Push called
// in-process by as many goroutines, in the same run against the same
// server: the price of the HTTP door. `make bench` runs it.
func BenchmarkPushTable(b *testing.B) {
	for i := 0; i < b.N; i++ {
		srv, db := server(b, lockgenapi.Options{WriteToken: token})
		o, err := ops.New(db, config)
		if err != nil {
			b.Fatal(err)
		}
		const clients, window = 8, 3 * time.Second
		args, body := `{"n": 1}`, `{"args": {"n": 1}}`
		direct := rate(clients, window, func(ctx context.Context) error {
			_, err := o.Push(ctx, "test", ops.Push{Args: json.RawMessage(args)})
			return err
		})
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
		overHTTP := rate(clients, window, func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/api/v1/jobs/test/runs", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		})
		fmt.Printf("\n| push, one run each, %d clients | runs/s |\n| --- | --- |\n", clients)
		fmt.Printf("| ops.Push in-process | %.0f |\n| POST /api/v1/jobs/{job}/runs | %.0f (%.2f of in-process) |\n", direct, overHTTP, overHTTP/direct)
	}
}

// rate runs fn from clients goroutines for window and returns calls/s; a
// failed call fails the benchmark's figure (it panics: a bench must not
// report a rate of errors).
func rate(clients int, window time.Duration, fn func(context.Context) error) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	var n atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := fn(ctx); err != nil {
					if ctx.Err() == nil {
						firstErr.CompareAndSwap(nil, err)
					}
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	if err := firstErr.Load(); err != nil {
		panic(fmt.Sprintf("push bench: %v", err))
	}
	return float64(n.Load()) / time.Since(start).Seconds()
}
