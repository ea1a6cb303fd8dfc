package e2e

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/deltabus/deltabus/tests/s3test"
	"github.com/deltabus/deltabus/verify"
)

// fanSource is one source of a fan-in test: a PostgreSQL cluster of its
// own, its truth slot, its producers and its relay processes, restarted
// as a supervisor (Kubernetes) would when one exits.
type fanSource struct {
	srv      *pgtest.Server
	db       *pgtest.DB
	truth    *truthSlot
	env      []string
	prod     producers
	produced chan struct{}

	mu    sync.Mutex
	procs []*relayProc
	exits []string // why relays exited on their own
	done  bool
}

func (f *fanSource) relay(t testing.TB) *relayProc {
	p := startRelay(t, f.env, "--batch-max-delay", "20ms", "--shutdown-timeout", "5s")
	f.mu.Lock()
	f.procs = append(f.procs, p)
	f.mu.Unlock()
	return p
}

func (f *fanSource) current() *relayProc {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.procs[len(f.procs)-1]
}

// supervise restarts the relay whenever it exits, until stop: a relay
// started while its database is down fails fast, by design.
func (f *fanSource) supervise(t testing.TB, stop <-chan struct{}) {
	for {
		p := f.current()
		for exited := false; !exited; exited, _ = p.exited() {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		f.mu.Lock()
		killed, done := p.killed, f.done
		if !killed && !done {
			f.exits = append(f.exits, p.tail())
		}
		f.mu.Unlock()
		if done {
			return
		}
		if !killed {
			time.Sleep(time.Second)
		}
		f.mu.Lock()
		restart := f.procs[len(f.procs)-1] == p // the test may have started the next one
		f.mu.Unlock()
		if restart {
			f.relay(t)
		}
	}
}

// TestManySourcesOneStoreLocal: three PostgreSQL clusters, each with
// `relay migrate` and `relay run` on default settings (the same slot name,
// the same topic names), one store. Producers write on all three while
// each relay is SIGKILLed and restarted and one PostgreSQL is killed with
// SIGKILL: every event of every source ends in its topic exactly once, in
// its source's commit order, and no relay skips another's commits as its
// own (the release before source identity lost half the events here).
func TestManySourcesOneStoreLocal(t *testing.T) {
	t.Parallel()
	url, store := localStore(t)
	fanInTest(t, url, store, nil)
}

// TestManySourcesOneStoreS3 is the same on a real S3 server (versitygw).
func TestManySourcesOneStoreS3(t *testing.T) {
	t.Parallel()
	b := s3test.NewBucket(t)
	store, err := storage.Open(context.Background(), b.URL("bus"), b.Options())
	if err != nil {
		t.Fatal(err)
	}
	fanInTest(t, b.URL("bus"), store, s3Env(b, b.Endpoint))
}

func fanInTest(t *testing.T, url string, store storage.Store, extraEnv []string) {
	const sources, events, rate = 3, 3000, 300
	fs := make([]*fanSource, sources)
	for i := range fs {
		srv := pgtest.NewServer(t, "synchronous_commit = on")
		dsn := srv.DSN("postgres")
		db := &pgtest.DB{Name: "postgres", DSN: dsn, ReplDSN: dsn + "&replication=database"}
		migrate(t, db.Conn(t))
		f := &fanSource{srv: srv, db: db, truth: newTruthSlot(t, db, "deltabus"), produced: make(chan struct{}),
			env: append([]string{"DELTABUS_SOURCE=" + dsn, "DELTABUS_STORE=" + url}, extraEnv...)}
		fs[i] = f
		waitSlotActive(t, dsn, "deltabus", f.relay(t))
	}
	t.Cleanup(func() {
		for _, f := range fs {
			logProblems(t, f.procs)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	stop := make(chan struct{})
	for _, f := range fs {
		go func() { f.prod.run(ctx, t, f.db.DSN, 4, events); close(f.produced) }()
		go f.supervise(t, stop)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	for round := range 2 {
		for i, f := range fs {
			time.Sleep(time.Duration(300+rng.IntN(900)) * time.Millisecond)
			f.mu.Lock()
			p := f.procs[len(f.procs)-1]
			p.killed = true
			f.mu.Unlock()
			p.kill()
			t.Logf("round %d: SIGKILLed source %d's relay after %d events", round, i, f.prod.written.Load())
		}
		if round == 0 {
			killPostgres(t, fs[1].srv)
		}
	}
	for i, f := range fs {
		select {
		case <-f.produced:
		case <-ctx.Done():
			t.Fatalf("source %d: producers did not finish", i)
		}
	}
	for _, f := range fs {
		waitDrained(t, f.db.DSN, "deltabus", 3*time.Minute)
	}
	close(stop)
	for i, f := range fs {
		f.mu.Lock()
		f.done = true
		f.mu.Unlock()
		if err := f.current().stop(30 * time.Second); err != nil && strings.Contains(err.Error(), "did not stop") {
			t.Fatalf("source %d: SIGTERM: %v", i, err)
		}
		for _, why := range f.exits {
			t.Logf("source %d: a relay exited on its own (restarted):\n%s", i, why)
		}
	}
	checkSources(t, store, fs, events)
}

// killPostgres kills a source's PostgreSQL with SIGKILL and starts it again
// after crash recovery; its relay reconnects by itself.
func killPostgres(t *testing.T, srv *pgtest.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := srv.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	t.Log("PostgreSQL of source 1 killed")
	eventually(t, time.Minute, "PostgreSQL restart after crash recovery", func() bool { return srv.StartAgain(ctx) == nil })
}

// checkSources checks every topic of the shared store against every
// source's truth: each source's events once each, in its commit order;
// nothing that is no source's; one marker per source, each its own appId.
func checkSources(t *testing.T, store storage.Store, fs []*fanSource, events int) {
	t.Helper()
	ctx := context.Background()
	owner := map[string]int{} // event id -> source
	want := make([]map[string][]truthRow, len(fs))
	appIDs := make([]string, len(fs))
	for i, f := range fs {
		appIDs[i] = f.db.AppID(t, "deltabus")
	}
	topicSet := map[string]bool{}
	for i, f := range fs {
		rows := f.truth.read(t)
		if len(rows) < events {
			t.Fatalf("source %d: truth slot saw %d inserts, producers wrote %d", i, len(rows), events)
		}
		want[i] = map[string][]truthRow{}
		for _, r := range rows {
			tp := r.Topic
			if outbox.ValidTopic(tp) != nil {
				tp = outbox.DeadLetterTopic
			}
			owner[r.ID] = i
			want[i][tp] = append(want[i][tp], r)
			topicSet[tp] = true
		}
	}
	for tp := range topicSet {
		got, err := verify.ReadTopic(ctx, store, tp)
		if err != nil {
			t.Fatalf("read topic %s: %v", tp, err)
		}
		bySource := make([][]verify.Logged, len(fs))
		for _, g := range got {
			i, ok := owner[g.ID]
			if !ok {
				t.Errorf("topic %s: row %s is no source's", tp, g.ID)
				continue
			}
			if g.Source != appIDs[i] {
				t.Errorf("topic %s: row %s of source %d says source %q, want %q", tp, g.ID, i, g.Source, appIDs[i])
			}
			bySource[i] = append(bySource[i], g)
		}
		for i := range fs {
			checkTopicAgainstTruth(t, tp+" of source "+string(rune('0'+i)), bySource[i], want[i][tp])
		}
	}
	markers, err := catalog.ListMarkers(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range markers {
		ids = append(ids, m.AppID)
	}
	slices.Sort(ids)
	if len(slices.Compact(ids)) != len(fs) {
		t.Errorf("markers %q: want one per source", ids)
	}
	for i, f := range fs {
		for _, p := range f.procs {
			if out := p.output(); strings.Contains(out, "zombie") || strings.Contains(out, "already committed") {
				t.Errorf("source %d: a relay took another source's commit for its own:\n%s", i, p.tail())
			}
		}
	}
}
