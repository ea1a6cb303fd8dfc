package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/deltabus/deltabus/tests/s3test"
	"github.com/deltabus/deltabus/verify"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(crashChildEnv); url != "" {
		if err := deltaWriterChild(url); err != nil {
			fmt.Fprintln(os.Stderr, "writer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(pgtest.Run(withS3{m}))
}

// withS3 runs the tests under both harnesses: PostgreSQL and versitygw.
type withS3 struct{ m *testing.M }

func (w withS3) Run() int { return s3test.Run(w.m) }

var topics = []string{"orders", "payments", "tenants", "ingestion", "quality"}

// setup migrates a fresh database and returns it.
func setup(t testing.TB) *pgtest.DB {
	t.Helper()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	conn := db.Conn(t)
	if _, err := migrations.Apply(ctx, conn, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	return db
}

// producers writes n events with `workers` concurrent producers, in
// transactions of 1-4 events that often span topics; it returns when done
// or when ctx ends. Insert errors during a PostgreSQL restart are retried.
type producers struct {
	written atomic.Int64
	rate    int      // events per second across workers; 0 = as fast as possible
	topics  []string // the topics written; nil = topics
	workers atomic.Int64
}

func (p *producers) topicList() []string {
	if p.topics == nil {
		return topics
	}
	return p.topics
}

func (p *producers) run(ctx context.Context, t testing.TB, dsn string, workers, n int) {
	p.workers.Store(int64(workers))
	var wg sync.WaitGroup
	per := n / workers
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.worker(ctx, t, dsn, w, per)
		}()
	}
	wg.Wait()
}

func (p *producers) worker(ctx context.Context, t testing.TB, dsn string, w, n int) {
	rng := rand.New(rand.NewPCG(uint64(w), 42))
	start, perWorker := time.Now(), float64(p.rate)/float64(max(1, p.workers.Load()))
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for done := 0; done < n && ctx.Err() == nil; {
		if conn == nil {
			c, err := pgx.Connect(ctx, dsn)
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			conn = c
		}
		k := min(1+rng.IntN(4), n-done)
		evs := make([]outbox.NewEvent, k)
		for i := range evs {
			tp := p.topicList()[rng.IntN(len(p.topicList()))]
			payload, _ := json.Marshal(map[string]any{"worker": w, "n": done + i, "note": "ünïcode \"quoted\""})
			evs[i] = outbox.NewEvent{Topic: tp, Key: fmt.Sprintf("k%d", rng.IntN(100)), Type: "Happened", Payload: payload}
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return outbox.Write(ctx, tx, evs...) })
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			conn.Close(context.Background())
			conn = nil // PostgreSQL restarting: reconnect and retry this transaction
			continue
		}
		done += k
		p.written.Add(int64(k))
		if p.rate > 0 {
			if ahead := time.Duration(float64(done)/perWorker*float64(time.Second)) - time.Since(start); ahead > 0 {
				time.Sleep(ahead)
			}
		}
	}
}

// checkAgainstTruth asserts that every topic holds exactly the source's
// event ids for that topic, each once. Rows the relay streamed (their
// commit_lsn is the source's) must be in the source's exact commit order.
// Rows a bootstrap copied from a snapshot carry the snapshot's position
// instead; they must all precede the streamed rows and be exactly the rows
// committed before the seam (the snapshot itself has no commit order).
func checkAgainstTruth(t testing.TB, root storage.Store, truth []truthRow) {
	t.Helper()
	ctx := context.Background()
	want := map[string][]truthRow{}
	for _, r := range truth {
		tp := r.Topic
		if outbox.ValidTopic(tp) != nil {
			tp = outbox.DeadLetterTopic
		}
		want[tp] = append(want[tp], r)
	}
	for tp, rows := range want {
		got, err := verify.ReadTopic(ctx, root, tp)
		if err != nil {
			t.Fatalf("read topic %s: %v", tp, err)
		}
		checkTopicAgainstTruth(t, tp, got, rows)
	}
}

func checkTopicAgainstTruth(t testing.TB, tp string, got []verify.Logged, want []truthRow) {
	t.Helper()
	byID := make(map[string]truthRow, len(want))
	for _, r := range want {
		byID[r.ID] = r
	}
	seen := make(map[string]bool, len(got))
	var streamed []string
	var maxSnap pglogrepl.LSN
	for i, g := range got {
		tr, ok := byID[g.ID]
		switch {
		case !ok:
			t.Errorf("topic %s: row %d (%s) is not a source row of this topic", tp, i, g.ID)
			continue
		case seen[g.ID]:
			t.Errorf("topic %s: %s is in the table twice", tp, g.ID)
			continue
		}
		seen[g.ID] = true
		if pglogrepl.LSN(g.CommitLSN) == tr.CommitLSN {
			streamed = append(streamed, g.ID)
			continue
		}
		if len(streamed) > 0 {
			t.Errorf("topic %s: snapshot row %s (commit_lsn %d) after streamed rows", tp, g.ID, g.CommitLSN)
		}
		maxSnap = max(maxSnap, tr.CommitLSN)
	}
	if len(seen) != len(want) {
		t.Errorf("topic %s: %d distinct source rows in Delta, %d in the source", tp, len(seen), len(want))
	}
	var wantStreamed []string
	for _, r := range want {
		if seen[r.ID] && r.CommitLSN > maxSnap {
			wantStreamed = append(wantStreamed, r.ID)
		}
	}
	if len(wantStreamed) != len(streamed) {
		t.Errorf("topic %s: seam: %d rows committed after the snapshot's last row were streamed as %d", tp, len(wantStreamed), len(streamed))
	}
	for i := range min(len(streamed), len(wantStreamed)) {
		if streamed[i] != wantStreamed[i] {
			t.Errorf("topic %s: streamed row %d is %s, source commit order says %s", tp, i, streamed[i], wantStreamed[i])
			return
		}
	}
}

var (
	relayBinOnce sync.Once
	relayBin     string
	relayBinErr  error
)

// buildRelay builds cmd/relay once per test binary.
func buildRelay(t testing.TB) string {
	t.Helper()
	relayBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "deltabus-relay-bin-")
		if err != nil {
			relayBinErr = err
			return
		}
		relayBin = filepath.Join(dir, "relay")
		out, err := exec.Command("go", "build", "-o", relayBin, "github.com/deltabus/deltabus/cmd/relay").CombinedOutput()
		if err != nil {
			relayBinErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if relayBinErr != nil {
		t.Fatal(relayBinErr)
	}
	return relayBin
}

// localStore returns a file:// URL and the store under a temp dir.
func localStore(t testing.TB) (string, storage.Store) {
	t.Helper()
	dir := t.TempDir()
	st, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	return "file://" + dir, st
}

// waitDrained waits until the slot confirmed the current WAL insert position.
func waitDrained(t testing.TB, dsn, slot string, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var target string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&target); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var ok *bool
		if err := conn.QueryRow(ctx, `SELECT confirmed_flush_lsn >= $1::pg_lsn FROM pg_replication_slots WHERE slot_name = $2`, target, slot).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		if ok != nil && *ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("slot %s did not confirm %s within %v", slot, target, timeout)
}

func migrate(t testing.TB, conn *pgx.Conn) {
	t.Helper()
	if _, err := migrations.Apply(context.Background(), conn, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
}

// heldState returns the rebuild state of the topic of the store's one relay
// (the zero state when it has none).
func heldState(ctx context.Context, store storage.Store, topic string) catalog.RebuildState {
	states, err := catalog.ListRebuildStates(ctx, store, topic)
	if err != nil || len(states) == 0 {
		return catalog.RebuildState{Topic: topic}
	}
	return states[0]
}

// soleAppID returns the appId of the store's one relay (from its marker).
func soleAppID(t testing.TB, store storage.Store) string {
	t.Helper()
	ms, err := catalog.ListMarkers(context.Background(), store)
	if err != nil || len(ms) != 1 {
		t.Fatalf("relay markers in %s: %+v %v; want one", store, ms, err)
	}
	return ms[0].AppID
}
