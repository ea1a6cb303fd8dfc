package maintain

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/deltasink"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/verify"
)

var grouped = []string{"m.a", "m.b", "m.c"}

// newGroupStore is a store with group m (topics m.*).
func newGroupStore(t *testing.T) storage.Store {
	t.Helper()
	root, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := catalog.WriteGroup(context.Background(), root, catalog.Group{Name: "m", Topics: []string{"m.*"}}); err != nil {
		t.Fatal(err)
	}
	return root
}

// writeGrouped commits batches as the relay of appID does: each batch one
// transaction with 2 events of each topic, one commit per table (the
// group's holds all its topics), at the transaction's LSN. It returns the
// event ids of each topic in commit order.
func writeGrouped(t *testing.T, root storage.Store, appID string, n int, topics []string, batches int) map[string][]string {
	ctx := context.Background()
	s := deltasink.New(root, deltasink.Options{AppID: appID, SyncCheckpoints: true})
	defer s.Close(ctx)
	tables := map[string]bool{}
	for _, tp := range topics {
		st, err := s.Open(ctx, tp)
		if err != nil {
			t.Error(err)
			return nil
		}
		tables[st.Table] = true
	}
	want := map[string][]string{}
	id := 0
	for b := range batches {
		batch := s.NewBatch()
		pos := int64(1000 + b*100)
		for k := range 2 * len(topics) {
			tp := topics[(k+b)%len(topics)]
			id++
			ev := &outbox.Event{ID: fmt.Sprintf("00000000-0000-4000-8%03d-%012d", n, id), Topic: tp, Key: "k", Type: "t",
				SchemaVersion: 1, Payload: `{"n":1}`, OccurredAt: time.Unix(1700000000, 0).UTC(), CommitLSN: pos, Seq: int32(k), CommitTime: time.Now().UTC()}
			if err := batch.Append(ev); err != nil {
				t.Error(err)
				return want
			}
			want[tp] = append(want[tp], ev.ID)
		}
		for table := range tables {
			if _, err := batch.Commit(ctx, table, pos); err != nil {
				t.Error(err)
				return want
			}
		}
	}
	return want
}

// checkOneTopicFiles checks that every active file of the group's table
// holds one topic, by its stats and by its rows, and that a reader of one
// topic (topic.MayHold) reads its own files only; it returns the files
// of each topic.
func checkOneTopicFiles(t *testing.T, root storage.Store) map[string]int {
	t.Helper()
	ctx := context.Background()
	st := storage.Sub(root, catalog.GroupTable("m"))
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]int{}
	for _, a := range snap.Files {
		var s struct {
			Min struct{ Topic string } `json:"minValues"`
			Max struct{ Topic string } `json:"maxValues"`
		}
		if err := json.Unmarshal([]byte(a.Stats), &s); err != nil || s.Min.Topic == "" || s.Min.Topic != s.Max.Topic {
			t.Fatalf("file %s of the group's table: stats %s, want one topic", a.Path, a.Stats)
		}
		err := topic.ReadEvents(ctx, st, a, func(e outbox.Event) error {
			if e.Topic != s.Min.Topic {
				return fmt.Errorf("a row of %s in a file of %s", e.Topic, s.Min.Topic)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("file %s: %v", a.Path, err)
		}
		files[s.Min.Topic]++
	}
	for name := range files {
		n := 0
		for _, a := range snap.Files {
			if topic.MayHold(a.Stats, name) {
				n++
			}
		}
		if n != files[name] {
			t.Fatalf("a reader of %s reads %d files, want its own %d", name, n, files[name])
		}
	}
	return files
}

// TestRunMaintainsAGroupTableOnce: the topics of a group share one table,
// maintained once per run beside the topics' own tables: its small mixed
// files are compacted into one file per topic, every topic reads the same
// rows in the same order, every topic's position is intact, and --topic
// or --group selects the group's table.
func TestRunMaintainsAGroupTableOnce(t *testing.T) {
	ctx := context.Background()
	root := newGroupStore(t)
	want := writeGrouped(t, root, "deltabus-test", 1, append([]string{"orders"}, grouped...), 110)
	before := map[string][]string{}
	for _, name := range append([]string{"orders"}, grouped...) {
		if before[name] = ids(t, root, name); !slices.Equal(before[name], want[name]) {
			t.Fatalf("%s before maintenance: %d rows, want %d", name, len(before[name]), len(want[name]))
		}
	}
	if err := catalog.WriteGroup(ctx, root, catalog.Group{Name: "idle", Topics: []string{"idle.*"}}); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(48 * time.Hour)
	rep, err := Run(ctx, root, Options{LogRetention: time.Hour, FileRetention: time.Hour, Now: func() time.Time { return later }})
	if err != nil || rep.Failed() || len(rep.Tables) != 2 {
		t.Fatalf("Run: %v %+v; want the group's table and orders, not the idle group's (no table)", err, rep)
	}
	g, o := rep.Tables[0], rep.Tables[1]
	if g.Table != "_group.m" || g.Group != "m" || !slices.Equal(g.Topics, grouped) || g.Topic != "" ||
		g.Compacted != 110 || g.Written != len(grouped) || g.FilesDeleted != 110 || g.ActiveFiles != len(grouped) ||
		g.Earliest != 100 || g.LogDeleted != 100 {
		t.Fatalf("the group's table: %+v; want 110 files compacted into one a topic and vacuumed, the log up to its checkpoint at 100 deleted", g)
	}
	if o.Table != "orders" || o.Topic != "orders" || o.Compacted != 110 || o.Written != 1 || o.Earliest != 100 {
		t.Fatalf("orders: %+v", o)
	}
	for name, n := range checkOneTopicFiles(t, root) {
		if n != 1 {
			t.Fatalf("%s: %d files", name, n)
		}
	}
	for name, rows := range before {
		if got := ids(t, root, name); !slices.Equal(got, rows) {
			t.Fatalf("%s after maintenance: %d rows, want the same %d in order", name, len(got), len(rows))
		}
	}
	snap, err := delta.LoadSnapshot(ctx, storage.Sub(root, "_group.m"), -1)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range grouped {
		if txn := snap.Txns["deltabus-test/"+name]; txn.Version != 1000+109*100 {
			t.Fatalf("%s's position after maintenance: %+v", name, txn)
		}
	}

	for _, sel := range []Options{{Topics: []string{"m.b"}}, {Groups: []string{"m"}}, {Topics: []string{"m.a", "m.c"}, Groups: []string{"m"}}} {
		sel.SkipCleanup, sel.SkipVacuum = true, true
		rep, err := Run(ctx, root, sel)
		if err != nil || len(rep.Tables) != 1 || rep.Tables[0].Table != "_group.m" || rep.Tables[0].Compacted != 0 {
			t.Fatalf("Run(%v %v): %v %+v; want the group's table once, nothing left to compact", sel.Topics, sel.Groups, err, rep)
		}
	}
	rep, err = Run(ctx, root, Options{Topics: []string{"m.new"}, SkipCleanup: true, SkipVacuum: true})
	if err != nil || len(rep.Tables) != 1 || rep.Tables[0].Table != "_group.m" {
		t.Fatalf("a topic of the group not registered yet: %v %+v; want the table it would be placed in", err, rep)
	}
}

// TestHeldTopicHoldsItsGroupTable: a hold of one topic of a group, by any
// source, leaves the whole group's table alone (its files mix the topic's
// rows with the others'); the topics' own tables are maintained; once the
// hold is lifted the group's table is maintained again.
func TestHeldTopicHoldsItsGroupTable(t *testing.T) {
	ctx := context.Background()
	root := newGroupStore(t)
	writeGrouped(t, root, "deltabus-test", 1, append([]string{"orders"}, grouped...), 10)
	hold := catalog.RebuildState{Topic: "m.b", AppID: "deltabus-2-other", Paused: catalog.HoldIncompatibleTable, PausedAt: "0/10"}
	if err := catalog.WriteRebuildState(ctx, root, hold); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(ctx, root, Options{})
	if err != nil || len(rep.Tables) != 2 {
		t.Fatalf("Run: %v %+v", err, rep)
	}
	g, o := rep.Tables[0], rep.Tables[1]
	if g.Table != "_group.m" || g.Compacted != 0 || !strings.Contains(g.Skipped, "m.b") || !strings.Contains(g.Skipped, "deltabus-2-other") {
		t.Fatalf("the group's table with m.b held: %+v; want it skipped, naming the topic and the relay", g)
	}
	if o.Compacted != 10 {
		t.Fatalf("orders beside a held group: %+v", o)
	}
	if n := len(snapshotFiles(t, root, "_group.m")); n != 10 {
		t.Fatalf("the held group's table has %d files, want its 10 untouched", n)
	}
	hold.Paused = ""
	if err := catalog.WriteRebuildState(ctx, root, hold); err != nil {
		t.Fatal(err)
	}
	if rep, err = Run(ctx, root, Options{Groups: []string{"m"}}); err != nil || rep.Tables[0].Skipped != "" || rep.Tables[0].Compacted != 10 {
		t.Fatalf("after the hold is lifted: %v %+v", err, rep)
	}
	checkOneTopicFiles(t, root)
}

func snapshotFiles(t *testing.T, root storage.Store, table string) map[string]delta.Add {
	t.Helper()
	snap, err := delta.LoadSnapshot(context.Background(), storage.Sub(root, table), -1)
	if err != nil {
		t.Fatal(err)
	}
	return snap.Files
}

// TestMaintainersBesideGroupCommits: two sources commit to the topics of
// a group (one table) while two maintainers compact, clean up and vacuum
// it at accelerated retention; afterwards every topic holds each source's
// rows once, in that source's order, every source's position of every
// topic is its last batch's, and the table's files hold one topic each.
func TestMaintainersBesideGroupCommits(t *testing.T) {
	ctx := context.Background()
	root := newGroupStore(t)
	later := func() time.Time { return time.Now().Add(2 * time.Hour) }
	opts := Options{LogRetention: time.Hour, FileRetention: time.Hour, Now: later}
	// The sources' files are uploaded before their commits: a relay holds
	// a lease over them (relay.go), which VACUUM honours.
	lease, err := catalog.HoldLease(ctx, root, "deltabus-writers", nil, time.Now, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx, root, "deltabus-writers")
	var wg sync.WaitGroup
	wants := make([]map[string][]string, 2)
	for s := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wants[s] = writeGrouped(t, root, fmt.Sprintf("deltabus-%d-s", s+1), s+1, grouped, 60)
		}()
	}
	stop := make(chan struct{})
	var mwg sync.WaitGroup
	var runs, compacted int
	var mu sync.Mutex
	for range 2 {
		mwg.Add(1)
		go func() {
			defer mwg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				rep, err := Run(ctx, root, opts)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				runs++
				for _, tr := range rep.Tables {
					compacted += tr.Compacted
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(stop)
	mwg.Wait()
	opts.Compact.MinFiles = 1 // the last batch's file too
	if rep, err := Run(ctx, root, opts); err != nil || rep.Failed() {
		t.Fatalf("last run: %v %+v", err, rep)
	}
	t.Logf("%d runs beside the writers compacted %d files", runs, compacted)
	if compacted == 0 {
		t.Fatal("no maintenance compacted anything while the sources wrote: the test did not race them")
	}
	checkOneTopicFiles(t, root)
	snap, err := delta.LoadSnapshot(ctx, storage.Sub(root, "_group.m"), -1)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range grouped {
		rows, err := verify.ReadTopic(ctx, root, name)
		if err != nil {
			t.Fatal(err)
		}
		bySource := map[string][]string{}
		for _, r := range rows {
			bySource[r.Source] = append(bySource[r.Source], r.ID)
		}
		for s := range 2 {
			app := fmt.Sprintf("deltabus-%d-s", s+1)
			if got := bySource[app]; !slices.Equal(got, wants[s][name]) {
				t.Fatalf("%s, source %s: %d rows, want %d in order", name, app, len(got), len(wants[s][name]))
			}
			if txn := snap.Txns[app+"/"+name]; txn.Version != 1000+59*100 {
				t.Fatalf("%s, source %s: position %+v", name, app, txn)
			}
		}
	}
}
