package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/pii"
	"github.com/deltabus/deltabus/relay"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/faultproxy"
)

// TestNewAgainstASilentStore: the contracts are read at start only to
// refuse early a start without a KEK; a store that never answers must not
// hold the start for its stall timeout times its retries (minutes) before
// the relay serves /healthz or names an error of the database's.
func TestNewAgainstASilentStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const url = "s3://bucket/prefix"
	hung := faultproxy.New(t, "127.0.0.1:1") // never forwards: every request hangs
	if err := hung.Set(faultproxy.Fault{Mode: faultproxy.Hang}); err != nil {
		t.Fatal(err)
	}
	st, err := storage.Open(ctx, url, storage.S3Options{Endpoint: hung.URL(), UsePathStyle: true,
		Region: "us-east-1", AccessKey: "deltabus", SecretKey: "not-a-secret"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := relay.Config{Source: "postgres://deltabus@127.0.0.1:1/none?sslmode=disable&connect_timeout=1", Store: url}
	const limit = time.Second
	t0 := time.Now()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	r, _, err := New(ctx, cfg, Options{Log: log, Store: st, PII: pii.Config{StartReadLimit: limit}})
	took := time.Since(t0)
	if err != nil {
		t.Fatalf("New against a silent store: %v, want a relay (the live classification decides)", err)
	}
	r.Ahead.Discard()
	if took > limit+3*time.Second {
		t.Fatalf("New took %v against a silent store, want about the start read limit %v", took, limit)
	}
	if ctx.Err() != nil {
		t.Fatal("the test's context ended first")
	}
	if !strings.Contains(logs.String(), "the contracts could not be read at start") {
		t.Fatalf("no warning that the contracts were not read at start; the log:\n%s", logs.String())
	}
}
