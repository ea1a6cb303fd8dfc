package storage_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/faultproxy"
	"github.com/deltabus/deltabus/tests/s3test"
)

// Outage tests reach versitygw through a fault proxy, with a short stall
// timeout and one HTTP retry so that each operation gives up quickly.
const (
	outageStall   = 300 * time.Millisecond
	outageRetries = 1
	// outageBound is how long any operation may take to fail: its worst
	// case is 2 × (retries+1) stalls plus backoff (~1.5s), with room for a
	// loaded machine.
	outageBound = 15 * time.Second
)

func proxiedS3(t *testing.T, logger *slog.Logger) (*storage.S3, *faultproxy.Proxy) {
	b := s3test.NewBucket(t)
	p := faultproxy.New(t, b.Endpoint)
	cfg := b.S3Config("p")
	cfg.Endpoint = p.URL()
	cfg.HTTPTimeout, cfg.HTTPRetries, cfg.Logger = outageStall, outageRetries, logger
	s := newS3(t, cfg)
	storage.SetPartSize(s, testPart)
	return s, p
}

func setFault(t *testing.T, p *faultproxy.Proxy, f faultproxy.Fault) {
	t.Helper()
	if err := p.Set(f); err != nil {
		t.Fatal(err)
	}
}

// storeOps returns one call of every Store operation, including uploads
// whose bodies do not fit in socket buffers (so a hung server blocks the
// client while it writes) and a multipart commit. Call i uses fresh keys.
func storeOps(s storage.Store) []struct {
	name string
	do   func(ctx context.Context, i int) error
} {
	big := randomBytes(6<<20, 9)
	return []struct {
		name string
		do   func(ctx context.Context, i int) error
	}{
		{"Get", func(ctx context.Context, _ int) error { _, err := s.Get(ctx, "k"); return err }},
		{"List", func(ctx context.Context, _ int) error { _, err := s.List(ctx, "", ""); return err }},
		{"Put", func(ctx context.Context, i int) error { return s.Put(ctx, fmt.Sprint("put/", i), []byte("x")) }},
		{"PutIfAbsent", func(ctx context.Context, i int) error { return s.PutIfAbsent(ctx, fmt.Sprint("pia/", i), []byte("x")) }},
		{"Delete", func(ctx context.Context, i int) error { return s.Delete(ctx, fmt.Sprint("put/", i)) }},
		{"Put 6 MiB", func(ctx context.Context, i int) error { return s.Put(ctx, fmt.Sprint("big/", i), big) }},
		{"Commit multipart", func(ctx context.Context, i int) error {
			return commitObject(ctx, s, fmt.Sprint("mp/", i), append(big, big...))
		}},
	}
}

// failThenRecover runs every Store operation against a server in fault f,
// checks how it failed (within outageBound), then runs it again once the
// fault is gone: it must succeed.
func failThenRecover(t *testing.T, f faultproxy.Fault, check func(op string, err error, took time.Duration)) {
	s, p := proxiedS3(t, nil)
	if err := s.Put(t.Context(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	for i, op := range storeOps(s) {
		setFault(t, p, f)
		start := time.Now()
		err := op.do(t.Context(), i)
		took := time.Since(start)
		if took > outageBound {
			t.Fatalf("%s in fault %v took %v to fail (bound %v): %v", op.name, f.Mode, took, outageBound, err)
		}
		check(op.name, err, took)
		setFault(t, p, faultproxy.Fault{})
		if err := op.do(t.Context(), i); err != nil {
			t.Fatalf("%s once fault %v is gone: %v", op.name, f.Mode, err)
		}
	}
}

// TestS3HangFailsThenRecovers: a server that accepts and never answers
// makes every operation fail with a StallError within the bound, and every
// operation works again once it answers.
func TestS3HangFailsThenRecovers(t *testing.T) {
	failThenRecover(t, faultproxy.Fault{Mode: faultproxy.Hang}, func(op string, err error, took time.Duration) {
		var stall *storage.StallError
		if !errors.As(err, &stall) || took < outageStall {
			t.Fatalf("%s against a hung server: %v after %v, want a StallError after at least %v", op, err, took, outageStall)
		}
		t.Logf("%s against a hung server: failed after %v: %v", op, took.Round(time.Millisecond), err)
	})
}

// TestS3RefusedFailsThenRecovers: a server that is down (connection
// refused) fails every operation promptly with that error.
func TestS3RefusedFailsThenRecovers(t *testing.T) {
	failThenRecover(t, faultproxy.Fault{Mode: faultproxy.Refuse}, func(op string, err error, _ time.Duration) {
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("%s against a stopped server: %v, want connection refused", op, err)
		}
	})
}

// TestS3EveryOther503Absorbed: a server throttling every other request
// costs retries, never an operation.
func TestS3EveryOther503Absorbed(t *testing.T) {
	s, p := proxiedS3(t, nil)
	if err := s.Put(t.Context(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	setFault(t, p, faultproxy.Fault{Mode: faultproxy.SlowDown503, Every: 2})
	for i, op := range storeOps(s) {
		if err := op.do(t.Context(), i); err != nil {
			t.Fatalf("%s with every other request throttled: %v", op.name, err)
		}
	}
	if st := p.Stats(); st.Faulted == 0 || st.Faulted > st.Requests/2 {
		t.Fatalf("proxy stats %+v: want about every other request throttled", st)
	}
}

// syncBuffer is a log destination safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Split(strings.TrimSuffix(b.buf.String(), "\n"), "\n")
}

// TestS3RetryLogBounded: during an outage where every request of four
// busy writers fails, the retry warnings go to the configured handler (JSON
// here), at most one per interval plus the first, and their counts add up
// to every failed attempt.
func TestS3RetryLogBounded(t *testing.T) {
	var out syncBuffer
	s, p := proxiedS3(t, slog.New(slog.NewJSONHandler(&out, nil)))
	const every, outage = 400 * time.Millisecond, 2 * time.Second
	storage.SetRetryLogEvery(s, every)
	setFault(t, p, faultproxy.Fault{Mode: faultproxy.SlowDown503})
	// The writers stop between puts, never mid-request: every attempt the
	// proxy fails reaches the retry policy.
	var stop atomic.Bool
	time.AfterFunc(outage, func() { stop.Store(true) })
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				s.Put(t.Context(), fmt.Sprintf("w%d/%d", w, i), []byte("x"))
			}
		})
	}
	wg.Wait()
	setFault(t, p, faultproxy.Fault{})
	time.Sleep(2 * every) // the trailing count is flushed
	failed := p.Stats().Faulted
	lines := out.lines()
	counted := 0
	for _, l := range lines {
		var rec struct {
			Level, Msg, Store string
			Suppressed        int
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q: %v", l, err)
		}
		if rec.Level != "WARN" || !strings.HasPrefix(rec.Msg, "s3 request failed") || rec.Store != s.String() ||
			!strings.Contains(l, `"status":503`) {
			t.Fatalf("unexpected log line %q", l)
		}
		counted += 1 + rec.Suppressed
	}
	// The writers' last puts may outlast the outage by one attempt cycle.
	maxLines := 3 + int(outage/every)
	if len(lines) < 2 || len(lines) > maxLines {
		t.Fatalf("%d log lines for %d failed attempts over %v, want 2..%d:\n%s", len(lines), failed, outage, maxLines, strings.Join(lines, "\n"))
	}
	if counted != failed {
		t.Fatalf("log lines account for %d failed attempts, the proxy failed %d", counted, failed)
	}
	t.Logf("%d failed attempts, %d log lines:\n%s", failed, len(lines), strings.Join(lines, "\n"))
}

// TestOpenS3Logger: Open hands S3Options.Logger to the store.
func TestOpenS3Logger(t *testing.T) {
	var out syncBuffer
	b := s3test.NewBucket(t)
	p := faultproxy.New(t, b.Endpoint)
	opts := b.Options()
	opts.Endpoint, opts.Logger = p.URL(), slog.New(slog.NewJSONHandler(&out, nil))
	s, err := storage.Open(t.Context(), b.URL("p"), opts)
	if err != nil {
		t.Fatal(err)
	}
	setFault(t, p, faultproxy.Fault{Mode: faultproxy.Error500, Limit: 1})
	if err := s.Put(t.Context(), "k", []byte("v")); err != nil {
		t.Fatalf("Put with one 500: %v", err)
	}
	lines := out.lines()
	if len(lines) != 1 || !strings.Contains(lines[0], `"status":500`) || !json.Valid([]byte(lines[0])) {
		t.Fatalf("log = %q, want one JSON line about the 500", lines)
	}
}
