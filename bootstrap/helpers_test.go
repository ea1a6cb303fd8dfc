package bootstrap_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/bootstrap"
	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/daemon"
	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/relay"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func testLog(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// newOutbox creates the outbox, its index and the publication.
func newOutbox(t testing.TB) *pgtest.DB {
	t.Helper()
	db := pgtest.NewDB(t)
	conn := db.Conn(t)
	if _, err := migrations.Apply(testCtx(t, time.Minute), conn, migrations.Options{}); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return db
}

const numTopics = 4

// fillTopics is the number of topics fill spreads rows over: numTopics,
// or DELTABUS_BENCH_TOPICS for benchmarks (e.g. 40).
func fillTopics() int {
	if v, err := strconv.Atoi(os.Getenv("DELTABUS_BENCH_TOPICS")); err == nil && v > 0 {
		return v
	}
	return numTopics
}

// fill inserts n rows spread over numTopics topics, with occurred_at in
// the past and deliberately not in id or insertion order.
func fill(t testing.TB, db *pgtest.DB, n int) {
	fillRows(t, db, n, fmt.Sprintf("(i::bigint * 7919) %% %d", n))
}

// fillOrdered inserts n rows whose occurred_at follows insertion order, as
// in a real outbox.
func fillOrdered(t testing.TB, db *pgtest.DB, n int) { fillRows(t, db, n, "i") }

func fillRows(t testing.TB, db *pgtest.DB, n int, ms string) {
	t.Helper()
	db.Exec(t, fmt.Sprintf(`INSERT INTO outbox (topic, key, type, payload, headers, occurred_at)
		SELECT 'topic-' || (i %% %d), 'k' || (i %% 997), 'created',
		       jsonb_build_object('i', i, 'note', repeat('x', 120) || E'\ttab\nline \\ back'),
		       CASE WHEN i %% 3 = 0 THEN '{"trace":"t"}'::jsonb END,
		       timestamptz '2026-01-01' + (%s) * interval '1 millisecond'
		FROM generate_series(1, %d) i`, fillTopics(), ms, n))
}

// startProducers starts k producers inserting small transactions, pausing
// pace after each (0 = full speed). The returned stop (also run at cleanup,
// idempotent) stops them and returns how many rows they inserted.
func startProducers(t testing.TB, db *pgtest.DB, k int, pace time.Duration) (stop func() int64) {
	done := make(chan struct{})
	wait := producers(t, db, k, pace, done)
	var once sync.Once
	var n int64
	stop = func() int64 {
		once.Do(func() { close(done); n = wait() })
		return n
	}
	t.Cleanup(func() { stop() })
	return stop
}

func producers(t testing.TB, db *pgtest.DB, k int, pace time.Duration, stop <-chan struct{}) (wait func() int64) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total int64
	for p := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, db.DSN)
			if err != nil {
				t.Errorf("producer %d: %v", p, err)
				return
			}
			defer conn.Close(ctx)
			rng := rand.New(rand.NewPCG(uint64(p), 42))
			var n int64
			for {
				select {
				case <-stop:
					mu.Lock()
					total += n
					mu.Unlock()
					return
				default:
				}
				rows := 1 + rng.IntN(5)
				_, err := conn.Exec(ctx, `INSERT INTO outbox (topic, key, type, payload)
					SELECT 'topic-' || ((i + $1) % 5), 'p' || $2::int, 'live', jsonb_build_object('i', i)
					FROM generate_series(1, $3::int) i`, rng.IntN(100), p, rows)
				if err != nil {
					t.Errorf("producer %d: %v", p, err)
					return
				}
				n += int64(rows)
				if pace > 0 {
					time.Sleep(pace)
				}
			}
		}()
	}
	return func() int64 { wg.Wait(); return total }
}

// sourceIDs returns the outbox ids by topic.
func sourceIDs(t testing.TB, db *pgtest.DB) map[string][]string {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	conn := db.Conn(t)
	rows, err := conn.Query(ctx, `SELECT topic, id::text FROM outbox`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for rows.Next() {
		var tp, id string
		if err := rows.Scan(&tp, &id); err != nil {
			t.Fatal(err)
		}
		out[tp] = append(out[tp], id)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	return out
}

// topicRows returns a topic's rows sorted by (commit_lsn, seq), and the
// txn version of appID for it (-1 without one): in a group's table, the
// rows whose topic column is the topic, and the txn appId/topic.
func topicRows(t testing.TB, store storage.Store, name, appID string) ([]topic.EventRef, int64) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	p, err := catalog.Locate(ctx, store, name)
	if err != nil {
		t.Fatal(err)
	}
	st := storage.Sub(store, p.Table)
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if errors.Is(err, delta.ErrNoTable) {
		return nil, -1
	}
	if err != nil {
		t.Fatalf("load topic %s: %v", name, err)
	}
	var refs []topic.EventRef
	for _, add := range snap.Files {
		if p.Shared() && !topic.MayHold(add.Stats, name) {
			continue
		}
		err := topic.ReadEventIDs(ctx, st, add, func(r topic.EventRef) error {
			if !p.Shared() || r.Topic == name {
				refs = append(refs, r)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.SortFunc(refs, func(a, b topic.EventRef) int {
		return cmp.Or(cmp.Compare(a.CommitLSN, b.CommitLSN), cmp.Compare(a.Seq, b.Seq))
	})
	v := int64(-1)
	if x, ok := snap.Txns[p.TxnAppID(appID)]; ok {
		v = x.Version
	}
	return refs, v
}

// checkTopics asserts every topic holds exactly the source's ids, once each,
// with no two rows at the same (commit_lsn, seq), and returns the number of
// snapshot rows (commit_lsn = snapLSN).
func checkTopics(t testing.TB, db *pgtest.DB, store storage.Store, appID string, snapLSN int64) int {
	t.Helper()
	src := sourceIDs(t, db)
	snapRows := 0
	for name, ids := range src {
		refs, _ := topicRows(t, store, name, appID)
		seen := make(map[string]bool, len(refs))
		for i, r := range refs {
			if seen[r.ID] {
				t.Errorf("topic %s: event %s twice", name, r.ID)
			}
			seen[r.ID] = true
			if i > 0 && refs[i-1].CommitLSN == r.CommitLSN && refs[i-1].Seq == r.Seq {
				t.Errorf("topic %s: two rows at (commit_lsn %d, seq %d)", name, r.CommitLSN, r.Seq)
			}
			if r.CommitLSN == snapLSN {
				snapRows++
			}
		}
		if len(seen) != len(ids) {
			t.Errorf("topic %s: %d distinct events in the topic, %d rows in the outbox", name, len(seen), len(ids))
		}
		for _, id := range ids {
			if !seen[id] {
				t.Errorf("topic %s: outbox row %s missing", name, id)
				break
			}
		}
	}
	return snapRows
}

// checkPhysicalOrder asserts that within each data file of a topic the
// snapshot rows (commit_lsn = snapLSN) are in the table's physical order and
// in increasing seq: the documented snapshot order.
func checkPhysicalOrder(t testing.TB, db *pgtest.DB, store storage.Store, name string, snapLSN int64) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	rows, err := db.Conn(t).Query(ctx, `SELECT id::text, (ctid::text::point)[0]::bigint, (ctid::text::point)[1]::bigint FROM outbox WHERE topic = $1`, name)
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string][2]int64{}
	for rows.Next() {
		var id string
		var p [2]int64
		if err := rows.Scan(&id, &p[0], &p[1]); err != nil {
			t.Fatal(err)
		}
		pos[id] = p
	}
	pl, err := catalog.Locate(ctx, store, name)
	if err != nil {
		t.Fatal(err)
	}
	st := storage.Sub(store, pl.Table)
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if err != nil {
		t.Fatal(err)
	}
	for _, add := range snap.Files {
		var prev topic.EventRef
		var prevPos [2]int64
		first := true
		err := topic.ReadEventIDs(ctx, st, add, func(r topic.EventRef) error {
			if r.CommitLSN != snapLSN || r.Topic != name {
				return nil
			}
			p := pos[r.ID]
			if !first && (r.Seq <= prev.Seq || p[0] < prevPos[0] || (p[0] == prevPos[0] && p[1] <= prevPos[1])) {
				t.Errorf("topic %s file %s: %s (seq %d, ctid %v) after %s (seq %d, ctid %v)", name, add.Path, r.ID, r.Seq, p, prev.ID, prev.Seq, prevPos)
			}
			prev, prevPos, first = r, p, false
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func localStore(t testing.TB) (storage.Store, string) {
	dir := t.TempDir()
	st, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st, "file://" + dir
}

// testConfig is a relay's bootstrap configuration as commands build it
// (no explicit appId), with AppID set to what they resolve it to.
func testConfig(t testing.TB, db *pgtest.DB, _ string) bootstrap.Config {
	return bootstrap.Config{Source: db.DSN, Slot: "deltabus", Publication: "deltabus", AppID: db.AppID(t, "deltabus")}
}

func parseLSN(s string) (int64, error) {
	l, err := pglogrepl.ParseLSN(s)
	return int64(l), err
}

// runInProcess runs an in-process relay (first start included) until the returned stop is called.
func runInProcess(t *testing.T, cfg bootstrap.Config, store storage.Store) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rcfg := relay.Config{Source: cfg.Source, Store: store.String(), Slot: cfg.Slot, Publication: cfg.Publication, AppID: cfg.AppID}
	r, _, err := daemon.New(ctx, rcfg, daemon.Options{Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- r.Run(ctx) }()
	select {
	case <-r.Started():
	case err := <-runErr:
		t.Fatalf("relay stopped before streaming: %v", err)
	case <-time.After(10 * time.Minute):
		t.Fatal("relay did not start streaming")
	}
	return func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("relay: %v", err)
		}
	}
}

// dropSlotWhenFree drops a replication slot once no walsender holds it: the
// walsender of a relay that just exited (stopped or killed) takes a moment
// to notice, and a slot in use cannot be dropped.
func dropSlotWhenFree(t *testing.T, db *pgtest.DB, slot string) {
	t.Helper()
	conn := db.Conn(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var active bool
		err := conn.QueryRow(t.Context(), "SELECT active FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&active)
		if err == nil && !active {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot %s still active (or unreadable: %v) 30 s after its relay exited", slot, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	db.Exec(t, "SELECT pg_drop_replication_slot($1)", slot)
}
