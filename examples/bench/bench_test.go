package main

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/lockgen/lockgen/examples/internal/exampletest"
)

// The same operations as the table, as `go test -bench` benchmarks (8
// parallel clients with -cpu 8, one with -cpu 1).
func BenchmarkSelect1(b *testing.B)     { benchOp(b, opSelect) }
func BenchmarkRawPair(b *testing.B)     { benchOp(b, opRaw) }
func BenchmarkLockgenPair(b *testing.B) { benchOp(b, opLockgen) }
func BenchmarkSessionPair(b *testing.B) { benchOp(b, opSession) }

func benchOp(b *testing.B, name string) {
	ctx := context.Background()
	e, err := setup(ctx, exampletest.FreshDSNs(b))
	if err != nil {
		b.Fatal(err)
	}
	defer e.close()
	var fn func(context.Context, int) error
	for _, o := range e.ops() {
		if o.name == name {
			fn = o.fn
		}
	}
	var clients atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		client := int(clients.Add(1))
		for pb.Next() {
			if err := fn(ctx, client); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// TestOperationsWork runs each benchmarked operation once, so `make test`
// proves the benchmark still measures working code.
func TestOperationsWork(t *testing.T) {
	ctx := context.Background()
	e, err := setup(ctx, exampletest.FreshDSNs(t))
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	for _, o := range e.ops() {
		for i := 0; i < 3; i++ {
			if err := o.fn(ctx, 1000+i); err != nil {
				t.Fatalf("%s: %v", o.name, err)
			}
		}
	}
}
