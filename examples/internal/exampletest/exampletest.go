// Package exampletest gives each example test a database of its own, so
// tests running at the same time (or next to a demo) never share lock rows.
package exampletest

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/lockgen/lockgen/examples/internal/demodb"
)

// FreshDSN creates an empty database on the test server
// (LOCKGEN_TEST_DSN, default demodb.DefaultDSN), drops it when the test
// ends, and returns a DSN that connects to it.
func FreshDSN(t testing.TB) string {
	t.Helper()
	cfg, err := demodb.Config(demodb.DSN("LOCKGEN_TEST_DSN"))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := demodb.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "lockgen_ex_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec("DROP DATABASE IF EXISTS " + name)
		_ = admin.Close()
	})
	fresh := cfg.Clone()
	fresh.DBName = name
	return fresh.FormatDSN()
}
