package reconcile

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/deltasink"
	"github.com/deltabus/deltabus/storage"
)

// groupEnv is env with a topic group "m" (topics m.*) whose tables the
// relay's own Delta sink writes.
type groupEnv struct {
	*env
	appID string
	sink  *deltasink.Sink
	pos   int64 // the last batch's position
}

func newGroupEnv(t *testing.T) *groupEnv {
	t.Helper()
	e := newEnv(t)
	if err := catalog.WriteGroup(context.Background(), e.root, catalog.Group{Name: "m", Topics: []string{"m.*"}, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	g := &groupEnv{env: e, appID: e.db.AppID(t, "deltabus"), pos: 1000}
	g.sink = deltasink.New(e.root, deltasink.Options{AppID: g.appID, SyncCheckpoints: true})
	return g
}

// commit writes the events as one batch of the relay: one commit per
// table (a group's table holds every topic of the group the batch has),
// at the next position.
func (g *groupEnv) commit(evs []outbox.Event) {
	g.t.Helper()
	ctx := context.Background()
	b := g.sink.NewBatch()
	tables := map[string]bool{}
	for i := range evs {
		tp, err := g.sink.Open(ctx, evs[i].Topic)
		if err != nil {
			g.t.Fatal(err)
		}
		tables[tp.Table] = true
		if err := b.Append(&evs[i]); err != nil {
			g.t.Fatal(err)
		}
	}
	g.pos += 1000
	for table := range tables {
		if _, err := b.Commit(ctx, table, g.pos); err != nil {
			g.t.Fatalf("commit %s at %d: %v", table, g.pos, err)
		}
	}
}

// interleave merges the lists one event of each at a time, as producers
// of several topics write them.
func interleave(lists ...[]outbox.Event) []outbox.Event {
	var out []outbox.Event
	for i := 0; ; i++ {
		n := len(out)
		for _, l := range lists {
			if i < len(l) {
				out = append(out, l[i])
			}
		}
		if len(out) == n {
			return out
		}
	}
}

func sortByOccurred(evs []outbox.Event) {
	slices.SortStableFunc(evs, func(x, y outbox.Event) int { return x.OccurredAt.Compare(y.OccurredAt) })
}

// groupEvents makes the events of three topics of group m and one topic of
// its own table, spread over two hours from base.
func groupEvents(e *env) (a, b, c, orders []outbox.Event) {
	return events("m.a", 240, e.base, 2*time.Hour), events("m.b", 90, e.base.Add(10*time.Minute), 100*time.Minute),
		events("m.c", 30, e.base.Add(time.Hour), time.Hour), events("orders", 60, e.base, 2*time.Hour)
}

// byTopic returns each topic's results.
func byTopic(rep *Report) map[string][]Result {
	out := map[string][]Result{}
	for _, r := range rep.Results {
		out[r.Topic] = append(out[r.Topic], r)
	}
	return out
}

// TestGroupedTopicsReconcileExactly: topics sharing a group's table, their
// events interleaved in mixed data files, are each checked against their
// own source rows: every count is the topic's, not the table's, whether a
// file holds one topic or several, by counts and id by id; results and the
// _reconciliation rows stay per topic.
func TestGroupedTopicsReconcileExactly(t *testing.T) {
	g := newGroupEnv(t)
	a, b, c, orders := groupEvents(g.env)
	for _, evs := range [][]outbox.Event{a, b, c, orders} {
		g.insertSource(evs)
	}
	// Most batches lie inside one window, so the counts of their files
	// come from the stats alone when they hold one topic; a few straddle
	// two windows; the last ones hold m.a alone.
	all := interleave(a, b, c, orders)
	sortByOccurred(all[:330])
	for i := 0; i < 330; i += 50 {
		g.commit(all[i:min(i+50, 330)])
	}
	g.commit(all[330:])
	g.advanceSlot()

	rep := g.run(2, nil)
	want := map[string][]int64{"m.a": {120, 120}, "m.b": {45, 45}, "m.c": {0, 30}, "orders": {30, 30}}
	got := byTopic(rep)
	if rep.ExitCode() != ExitClean || len(got) != len(want) {
		t.Fatalf("exit %d, topics %d: %+v", rep.ExitCode(), len(got), rep.Results)
	}
	for name, counts := range want {
		for i, r := range got[name] {
			if r.Status != StatusClean || r.SourceCount != counts[i] || r.LogCount == nil || *r.LogCount != counts[i] {
				t.Errorf("%s window %d: %s source %d log %s, want clean with %d each", name, i, r.Status, r.SourceCount, optInt(r.LogCount), counts[i])
			}
			if wantTable := map[bool]string{true: "_group.m", false: ""}[strings.HasPrefix(name, "m.")]; r.Table != wantTable {
				t.Errorf("%s: table %q, want %q", name, r.Table, wantTable)
			}
		}
	}
	rep = g.run(2, func(o *Options) { o.VerifyIDs = true })
	for _, r := range rep.Results {
		if r.Status != StatusClean || r.Check != CheckIDs || r.DistinctCount == nil || *r.DistinctCount != r.SourceCount {
			t.Errorf("ids: %s %s: %s distinct %v source %d", r.Topic, r.Window, r.Status, r.DistinctCount, r.SourceCount)
		}
	}
	if _, err := Record(context.Background(), g.root, rep); err != nil {
		t.Fatal(err)
	}
	last, err := LastResults(context.Background(), g.root, 10)
	if err != nil {
		t.Fatal(err)
	}
	for name := range want {
		if l := last[name]; l.Status != StatusClean || l.Windows != 2 {
			t.Errorf("_reconciliation of %s: %+v, want clean over 2 windows", name, l)
		}
	}
	if len(last) != len(want) {
		t.Fatalf("_reconciliation topics %v, want the 4 topics", last)
	}
}

// TestGroupedTopicMissingEventIsItsAlone: an event lost from one topic of
// a group is reported missing in that topic, by exact id, and no other
// topic of the group (whose rows share its files) is blamed; a batch of a
// grouped topic committed twice gives exact duplicates in that topic only.
func TestGroupedTopicMissingEventIsItsAlone(t *testing.T) {
	g := newGroupEnv(t)
	a, b, c, orders := groupEvents(g.env)
	for _, evs := range [][]outbox.Event{a, b, c, orders} {
		g.insertSource(evs)
	}
	lost := b[50] // second window of m.b
	var kept []outbox.Event
	for _, ev := range interleave(a, b, c, orders) {
		if ev.ID != lost.ID {
			kept = append(kept, ev)
		}
	}
	sortByOccurred(kept)
	for i := 0; i < len(kept); i += 40 {
		g.commit(kept[i:min(i+40, len(kept))])
	}
	again := a[10:15] // first window of m.a, written by a second commit of the same source
	g.commit(slices.Concat(again, c[:3]))
	g.advanceSlot()

	rep := g.run(2, func(o *Options) { o.LeafRows = 20 })
	if rep.ExitCode() != ExitDivergence {
		t.Fatalf("exit %d, want 1", rep.ExitCode())
	}
	wantDups := slices.Sorted(slices.Values(ids(again)))
	for _, r := range rep.Results {
		var dups []string
		for _, d := range r.Duplicates {
			dups = append(dups, d.ID)
		}
		slices.Sort(dups)
		first := r.Window.Start.Equal(g.base)
		switch {
		case r.Topic == "m.b" && !first:
			if r.Status != StatusDiverged || !slices.Equal(r.Missing, []string{lost.ID}) || r.MissingCount != 1 ||
				r.UnexpectedCount+r.DuplicateCount != 0 || len(r.Narrowed) == 0 {
				t.Errorf("m.b second window: %s missing %v unexpected %d dups %d narrowed %v; want exactly %s missing",
					r.Status, r.Missing, r.UnexpectedCount, r.DuplicateCount, r.Narrowed, lost.ID)
			}
		case r.Topic == "m.a" && first:
			if r.Status != StatusDiverged || !slices.Equal(dups, wantDups) || r.DuplicateCount != 5 || r.MissingCount+r.UnexpectedCount != 0 {
				t.Errorf("m.a first window: %s dups %v (%d) missing %d unexpected %d; want the 5 ids committed twice",
					r.Status, dups, r.DuplicateCount, r.MissingCount, r.UnexpectedCount)
			}
		case r.Topic == "m.c" && !first:
			if r.Status != StatusDiverged || r.DuplicateCount != 3 || r.MissingCount+r.UnexpectedCount != 0 {
				t.Errorf("m.c second window: %s dups %d missing %d unexpected %d; want 3 duplicates", r.Status, r.DuplicateCount, r.MissingCount, r.UnexpectedCount)
			}
		default:
			if r.Status != StatusClean {
				t.Errorf("%s %s: %s (missing %v, unexpected %v, dups %v): blamed for another topic's difference", r.Topic, r.Window, r.Status, r.Missing, r.Unexpected, dups)
			}
		}
	}
}

// countingStore counts the Gets of keys under a prefix.
type countingStore struct {
	storage.Store
	prefix string
	gets   atomic.Int64
}

func (s *countingStore) Get(ctx context.Context, key string) ([]byte, error) {
	if strings.HasPrefix(key, s.prefix) && strings.HasSuffix(key, ".parquet") && !strings.Contains(key, delta.LogDir) {
		s.gets.Add(1)
	}
	return s.Store.Get(ctx, key)
}

// TestGroupTableFilesAreReadOncePerRun: a run reads the group table's log
// once and each of its mixed data files once for all of its topics, not
// once per topic.
func TestGroupTableFilesAreReadOncePerRun(t *testing.T) {
	g := newGroupEnv(t)
	a, b, c, _ := groupEvents(g.env)
	for _, evs := range [][]outbox.Event{a, b, c} {
		g.insertSource(evs)
	}
	all := interleave(a, b, c)
	for i := 0; i < len(all); i += 60 {
		g.commit(all[i:min(i+60, len(all))])
	}
	g.advanceSlot()
	snap, err := delta.LoadSnapshot(context.Background(), storage.Sub(g.root, "_group.m"), -1)
	if err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Store: g.root, prefix: "_group.m/"}
	o := Options{From: g.base, To: g.base.Add(2 * time.Hour), Window: time.Hour, DurableWait: 10 * time.Second}
	rep, err := Run(context.Background(), g.db.DSN, cs, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ExitCode() != ExitClean || len(rep.Results) != 6 {
		t.Fatalf("exit %d, %d results: %+v", rep.ExitCode(), len(rep.Results), rep.Results)
	}
	if n := cs.gets.Load(); n == 0 || n > int64(len(snap.Files)) {
		t.Fatalf("%d data file reads for 3 topics of a table of %d files, want at most one each", n, len(snap.Files))
	}
}

// TestReplacedGroupTableIsAnError: a grouped topic whose group table was
// deleted and created again (another table id) is an error naming the
// rebuild, never a clean or silently empty log.
func TestReplacedGroupTableIsAnError(t *testing.T) {
	g := newGroupEnv(t)
	a := events("m.a", 20, g.base, time.Hour)
	g.insertSource(a)
	g.commit(a)
	g.advanceSlot()
	ctx := context.Background()
	st := storage.Sub(g.root, "_group.m")
	objs, err := st.List(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := st.Delete(ctx, o.Key); err != nil {
			t.Fatal(err)
		}
	}
	other := deltasink.New(g.root, deltasink.Options{AppID: "deltabus-2-other"})
	if _, err := other.Open(ctx, "m.z"); err != nil {
		t.Fatal(err)
	}
	ob := other.NewBatch()
	z := events("m.z", 1, g.base, time.Minute)
	if err := ob.Append(&z[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := ob.Commit(ctx, "_group.m", 5); err != nil {
		t.Fatal(err)
	}
	rep := g.run(1, func(o *Options) { o.Topics = []string{"m.a"} })
	if len(rep.Results) != 1 || rep.Results[0].Status != StatusError || !strings.Contains(rep.Results[0].Error, "relay rebuild --topic m.a") {
		t.Fatalf("results %+v, want one error naming the rebuild", rep.Results)
	}
}
