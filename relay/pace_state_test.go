package relay

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deltabus/deltabus/sink"
	"github.com/deltabus/deltabus/sink/sinktest"
)

func TestStatePaceInterval(t *testing.T) {
	for _, c := range []struct {
		files, threshold int64
		want             time.Duration
	}{
		{0, 100, 0}, {100, 100, 0}, {101, 100, 10 * time.Millisecond}, {150, 100, 500 * time.Millisecond},
		{200, 100, time.Second}, {300, 100, 2 * time.Second}, {10_000, 100, statePaceMaxInterval},
		{25_001, 25_000, time.Millisecond}, // never less than a millisecond once over
	} {
		if got := statePaceInterval(c.files, c.threshold); got != c.want {
			t.Errorf("statePaceInterval(%d, %d) = %v, want %v", c.files, c.threshold, got, c.want)
		}
	}
	if newStatePace(-1, stateSink{}, slog.Default()) != nil || newStatePace(10, sinktest.NewMemory(), slog.Default()) != nil {
		t.Error("pacing on with a negative threshold or a sink that reports no state")
	}
}

// stateSink is a memory sink whose tables' state is one file per commit,
// as a Delta table's is.
type stateSink struct {
	*sinktest.Memory
	mu      *sync.Mutex
	commits map[string]int64
}

func newStateSink() stateSink {
	s := stateSink{Memory: sinktest.NewMemory(), mu: &sync.Mutex{}, commits: map[string]int64{}}
	s.BeforeCommit = func(_ context.Context, table string, _ int64) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.commits[table]++
		return nil
	}
	return s
}

func (s stateSink) TableStates() []sink.TableState {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sink.TableState
	for table, n := range s.commits {
		out = append(out, sink.TableState{Table: table, Files: n})
	}
	return out
}

var _ sink.StateReporter = stateSink{}

// A table whose state passes the threshold commits ever less often, every
// event once and in order, while a small table beside it commits at once;
// the relay says so once.
func TestLargeStatePacesItsTable(t *testing.T) {
	const threshold = 40
	ss, commits := newStateSink(), &commitLog{at: map[string][]time.Time{}}
	count := ss.BeforeCommit
	ss.BeforeCommit = func(ctx context.Context, table string, pos int64) error {
		_ = commits.hook(ctx, table, pos)
		return count(ctx, table, pos)
	}
	logged := &syncWriter{w: &bytes.Buffer{}}
	h := newHarnessWith(t, ss.Memory, 0x1000, func(c *Config) { c.StatePaceFiles = threshold; c.BatchMaxDelay = 0 },
		func(r *Relay) {
			r.log = slog.New(slog.NewTextHandler(logged, nil))
			r.setSink(ss)
		})
	// orders commits up to 50 times a second until the relay reads its
	// state past the threshold (within a second of it), then 3 s more.
	end := h.src.lsn
	var detected time.Time
	var files int64
	for deadline := time.Now().Add(15 * time.Second); detected.IsZero(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("orders was never paced; the relay logged:\n%s", logged.String())
		}
		_, end = h.src.tx("orders")
		if line, ok := logLine(logged, "table state large"); ok {
			detected, files = time.Now(), attrInt(t, line, "files")
		}
	}
	for window := time.Now().Add(3 * time.Second); time.Now().Before(window); time.Sleep(20 * time.Millisecond) {
		_, end = h.src.tx("orders")
	}
	_, quick := h.src.tx("payments")
	sent := time.Now()
	deadline := time.Now().Add(2 * time.Second)
	for len(ss.Rows("payments")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("payments, a small table, waited for orders' pace")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if took := time.Since(sent); took > time.Second {
		t.Errorf("payments committed after %v", took)
	}
	h.waitAck(quick)
	h.waitAck(end)
	if got := ids(ss.Rows("orders")); !slices.Equal(got, h.src.sent["orders"]) {
		t.Fatalf("orders: %d rows, want %d in order", len(got), len(h.src.sent["orders"]))
	}
	// Once paced, orders' commits are at least the interval of its state
	// when first read past the threshold apart (the state only grows).
	want := statePaceInterval(files, threshold)
	var after []time.Time
	for _, at := range commits.times("orders") {
		if at.After(detected) {
			after = append(after, at)
		}
	}
	for i := 1; i < len(after); i++ {
		if gap := after[i].Sub(after[i-1]); gap < want/2 {
			t.Errorf("paced commits %d and %d of orders %v apart, want at least %v (%d files)", i-1, i, gap, want, files)
		}
	}
	if limit := int(time.Since(detected)/want) + 2; len(after) < 2 || len(after) > limit {
		t.Errorf("orders committed %d times in the %v since it was paced at %d files (interval %v), want 2 to %d",
			len(after), time.Since(detected), files, want, limit)
	}
	h.stop()
	if err := h.ended(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logged.String(), "table state large"); n != 1 || !strings.Contains(logged.String(), "table=orders") {
		t.Errorf("logged the pacing %d times:\n%s", n, logged.String())
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// logLine returns the first line of buf that holds msg.
func logLine(w *syncWriter, msg string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for line := range strings.Lines(w.w.String()) {
		if strings.Contains(line, msg) {
			return line, true
		}
	}
	return "", false
}

// attrInt returns the integer attribute key=N of a text log line.
func attrInt(t *testing.T, line, key string) int64 {
	t.Helper()
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("%s in %q: %v", key, line, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in %q", key, line)
	return 0
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.String()
}
