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

// BenchmarkHTTPTable prints, in the same run against the same server, the
// runs per second enqueued over HTTP (one run per request, and 100 per
// batch request; 8 clients on kept-alive connections) and the runs per
// second worked by consumers over HTTP (claim 100, complete each), each
// beside the same operation called in-process through package ops by as
// many goroutines: the price of the HTTP door. `make bench` runs it, after
// the Go workers' jobs table (RunJobs, Enqueue) of the same sitting.
func BenchmarkHTTPTable(b *testing.B) {
	for i := 0; i < b.N; i++ {
		srv, db := server(b, lockgenapi.Options{WriteToken: token})
		o, err := ops.New(db, config)
		if err != nil {
			b.Fatal(err)
		}
		const clients, window = 8, 3 * time.Second
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
		post := func(ctx context.Context, path, body string, want int) ([]byte, error) {
			req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := client.Do(req)
			if err != nil {
				return nil, err
			}
			defer resp.Body.Close()
			out, err := io.ReadAll(resp.Body)
			if err == nil && resp.StatusCode != want {
				err = fmt.Errorf("%s: status %d: %s", path, resp.StatusCode, out)
			}
			return out, err
		}

		args := `{"n": 1}`
		direct := rate(clients, window, func(ctx context.Context) error {
			_, err := o.Push(ctx, "test", ops.Push{Args: json.RawMessage(args)})
			return err
		})
		overHTTP := rate(clients, window, func(ctx context.Context) error {
			_, err := post(ctx, "/api/v1/jobs/test/runs", `{"args": {"n": 1}}`, http.StatusCreated)
			return err
		})
		const batch = 100
		many := make([]ops.Push, batch)
		for i := range many {
			many[i].Args = json.RawMessage(args)
		}
		batchBody := `{"runs": [` + strings.TrimSuffix(strings.Repeat(`{"args": {"n": 1}},`, batch), ",") + `]}`
		directMany := batch * rate(clients, window, func(ctx context.Context) error {
			_, err := o.PushMany(ctx, "test", many)
			return err
		})
		overHTTPMany := batch * rate(clients, window, func(ctx context.Context) error {
			_, err := post(ctx, "/api/v1/jobs/test/runs/batch", batchBody, http.StatusCreated)
			return err
		})

		const runs = 5000
		fill := func() {
			for n := 0; n < runs; n += ops.MaxPushBatch {
				ps := make([]ops.Push, ops.MaxPushBatch)
				if _, err := o.PushMany(context.Background(), "mail", ps); err != nil {
					b.Fatal(err)
				}
			}
		}
		fill()
		consumeDirect := drain(clients, runs, func(ctx context.Context) (int, error) {
			got, err := o.Claim(ctx, "mail", ops.ClaimRequest{Worker: "bench", Limit: 100})
			for _, r := range got {
				if err == nil {
					_, err = o.Complete(ctx, r.ID, r.Claim)
				}
			}
			return len(got), err
		})
		fill()
		consumeHTTP := drain(clients, runs, func(ctx context.Context) (int, error) {
			out, err := post(ctx, "/api/v1/queues/mail/claim", `{"worker": "bench", "limit": 100}`, http.StatusOK)
			if err != nil {
				return 0, err
			}
			var got struct{ Items []ops.Claimed }
			if err := json.Unmarshal(out, &got); err != nil {
				return 0, err
			}
			for _, r := range got.Items {
				if _, err := post(ctx, fmt.Sprintf("/api/v1/runs/%d/complete", r.ID), fmt.Sprintf(`{"claim": %d}`, r.Claim), http.StatusOK); err != nil {
					return 0, err
				}
			}
			return len(got.Items), nil
		})

		fill()
		consumeDirectBatch := drain(clients, runs, func(ctx context.Context) (int, error) {
			got, err := o.Claim(ctx, "mail", ops.ClaimRequest{Worker: "bench", Limit: 100})
			if err != nil || len(got) == 0 {
				return 0, err
			}
			refs := make([]ops.ClaimRef, len(got))
			for i, r := range got {
				refs[i] = ops.ClaimRef{ID: r.ID, Claim: r.Claim}
			}
			_, err = o.CompleteMany(ctx, refs)
			return len(got), err
		})
		fill()
		consumeHTTPBatch := drain(clients, runs, func(ctx context.Context) (int, error) {
			out, err := post(ctx, "/api/v1/queues/mail/claim", `{"worker": "bench", "limit": 100}`, http.StatusOK)
			if err != nil {
				return 0, err
			}
			var got struct{ Items []ops.Claimed }
			if err := json.Unmarshal(out, &got); err != nil || len(got.Items) == 0 {
				return 0, err
			}
			refs := make([]ops.ClaimRef, len(got.Items))
			for i, r := range got.Items {
				refs[i] = ops.ClaimRef{ID: r.ID, Claim: r.Claim}
			}
			body, _ := json.Marshal(map[string]any{"runs": refs})
			_, err = post(ctx, "/api/v1/runs/complete", string(body), http.StatusOK)
			return len(got.Items), err
		})

		fmt.Printf("\n| %d clients | in-process (ops) | over HTTP | ratio |\n| --- | --- | --- | --- |\n", clients)
		fmt.Printf("| push, one run per request, runs/s | %.0f | %.0f | %.2f |\n", direct, overHTTP, overHTTP/direct)
		fmt.Printf("| push, %d runs per request, runs/s | %.0f | %.0f | %.2f |\n", batch, directMany, overHTTPMany, overHTTPMany/directMany)
		fmt.Printf("| consume %d runs: claim 100, complete each, runs/s | %.0f | %.0f | %.2f |\n", runs, consumeDirect, consumeHTTP, consumeHTTP/consumeDirect)
		fmt.Printf("| consume %d runs: claim 100, complete them in one request, runs/s | %.0f | %.0f | %.2f |\n", runs, consumeDirectBatch, consumeHTTPBatch, consumeHTTPBatch/consumeDirectBatch)
	}
}

// drain runs work from clients goroutines until it has handled want runs
// (each call returns how many it handled) and returns runs/s.
func drain(clients, want int, work func(context.Context) (int, error)) float64 {
	var done atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done.Load() < int64(want) && ctx.Err() == nil {
				n, err := work(ctx)
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					cancel()
					return
				}
				done.Add(int64(n))
			}
		}()
	}
	wg.Wait()
	if err := firstErr.Load(); err != nil {
		panic(fmt.Sprintf("consume bench: %v", err))
	}
	if done.Load() < int64(want) {
		panic(fmt.Sprintf("consume bench: %d of %d runs in 5 minutes", done.Load(), want))
	}
	return float64(done.Load()) / time.Since(start).Seconds()
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
		panic(fmt.Sprintf("http bench: %v", err))
	}
	return float64(n.Load()) / time.Since(start).Seconds()
}
