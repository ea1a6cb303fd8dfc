package topic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// groupTopics are the topics of the group tables of these tests.
var groupTopics = []string{"m.a", "m.b", "m.c", "m.d", "m.e"}

// groupEvents is testEvents spread over topics as a group's source writes
// them: each transaction mixes topics, seq is the row's place in its
// transaction (as in a stream), and some topics are much busier.
func groupEvents(n, txSize int, lsn0 int64, topics []string) []outbox.Event {
	evs := testEvents(n, txSize, lsn0)
	for i := range evs {
		k := (i*7 + i/5) % (len(topics) + 3)
		if k >= len(topics) {
			k = 0 // the first topic is the busiest
		}
		evs[i].Topic = topics[k]
	}
	return evs
}

// byTopic splits events by topic, each topic's in the order given.
func byTopic(evs []outbox.Event) map[string][]outbox.Event {
	out := map[string][]outbox.Event{}
	for _, e := range evs {
		out[e.Topic] = append(out[e.Topic], e)
	}
	return out
}

// groupCommit writes evs as one group commit of a relay: one mixed data
// file (or more), and a txn per topic it holds, at the batch's last LSN.
func groupCommit(t testing.TB, st storage.Store, tbl *delta.Table, opts FileOptions, evs []outbox.Event) error {
	adds := writeEvents(t, st, opts, evs)
	pos := evs[len(evs)-1].CommitLSN
	var txns []delta.Txn
	for _, name := range slices.Sorted(maps.Keys(byTopic(evs))) {
		txns = append(txns, delta.Txn{AppID: relayApp + "/" + name, Version: pos})
	}
	_, err := tbl.Commit(context.Background(), delta.CommitActions{Adds: adds, Txns: txns})
	return err
}

// fileTopic returns the topic the add's stats bound it to, "" when its
// bounds differ or are absent.
func fileTopic(t testing.TB, a delta.Add) string {
	t.Helper()
	var s struct {
		Min struct{ Topic *string } `json:"minValues"`
		Max struct{ Topic *string } `json:"maxValues"`
	}
	if err := json.Unmarshal([]byte(a.Stats), &s); err != nil {
		t.Fatalf("stats of %s: %v", a.Path, err)
	}
	if s.Min.Topic == nil || s.Max.Topic == nil || *s.Min.Topic != *s.Max.Topic {
		return ""
	}
	return *s.Min.Topic
}

// topicEvents reads one topic's rows as a reader of the group table does:
// the files whose stats may hold it (MayHold), in the order of their
// lowest (commit_lsn, seq), rows in file order, keeping the topic's rows.
// It returns how many files it read.
func topicEvents(t testing.TB, st storage.Store, snap *delta.Snapshot, name string) ([]outbox.Event, int) {
	t.Helper()
	var files []inputFile
	for _, a := range snap.Files {
		if MayHold(a.Stats, name) {
			files = append(files, fileStatsOf(a))
		}
	}
	slices.SortFunc(files, func(a, b inputFile) int { return a.lo.cmp(b.lo) })
	var out []outbox.Event
	for _, f := range files {
		for _, e := range readAll(t, st, []delta.Add{f.add}) {
			if e.Topic == name {
				out = append(out, e)
			}
		}
	}
	return out, len(files)
}

// checkOneTopicFiles checks that every active file's stats name one topic
// and that its rows are that topic's; it returns the files per topic.
func checkOneTopicFiles(t testing.TB, st storage.Store, snap *delta.Snapshot) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, a := range snap.Files {
		name := fileTopic(t, a)
		if name == "" {
			t.Fatalf("file %s holds more than one topic after compaction: stats %s", a.Path, a.Stats)
		}
		for _, e := range readAll(t, st, []delta.Add{a}) {
			if e.Topic != name {
				t.Fatalf("file %s of topic %s holds a row of %s", a.Path, name, e.Topic)
			}
		}
		n[name]++
	}
	return n
}

// checkGroupRows checks that every topic reads its rows, exactly and in
// order, from its own files only.
func checkGroupRows(t testing.TB, st storage.Store, snap *delta.Snapshot, want map[string][]outbox.Event, files map[string]int) {
	t.Helper()
	for name, evs := range want {
		got, read := topicEvents(t, st, snap, name)
		checkSameEvents(t, got, evs)
		if files != nil && read != files[name] {
			t.Fatalf("a reader of %s read %d files, want its own %d", name, read, files[name])
		}
	}
}

// checkOptimizeCommits checks that the compaction's commits are OPTIMIZE
// rewrites: no txn, dataChange=false on every add and remove.
func checkOptimizeCommits(t testing.TB, st storage.Store, versions []int64) {
	t.Helper()
	for _, v := range versions {
		data, err := st.Get(t.Context(), delta.CommitKey(v))
		if err != nil {
			t.Fatal(err)
		}
		acts, err := delta.ParseCommit(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range acts {
			switch {
			case a.CommitInfo != nil && a.CommitInfo.Operation() != "OPTIMIZE":
				t.Fatalf("version %d: operation %s", v, a.CommitInfo.Operation())
			case a.Txn != nil:
				t.Fatalf("version %d: a compaction commit carries txn %+v", v, *a.Txn)
			case a.Add != nil && a.Add.DataChange, a.Remove != nil && a.Remove.DataChange:
				t.Fatalf("version %d: dataChange=true in %+v", v, a)
			}
		}
	}
}

// TestCompactGroupTableSplitsTopics: a group table of many small mixed
// files (and a few files of one topic) is compacted into files of one
// topic each: stats and contents name one topic, each topic reads the
// same rows in the same order from its own files alone, every topic's txn
// is intact, the change feed sees nothing; later runs split the new mixed
// files and pack each topic's files together. With a tiny memory budget
// the outputs are staged and written out early, and come out the same.
func TestCompactGroupTableSplitsTopics(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts CompactOptions
	}{
		{"defaults", CompactOptions{}},
		{"tiny budget", CompactOptions{SplitMemoryBytes: 1, RowGroupRows: 100, TargetFileBytes: 24 << 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bothStores(t, func(t *testing.T, root storage.Store) { testCompactGroup(t, root, tc.opts) })
		})
	}
}

func testCompactGroup(t *testing.T, root storage.Store, opts CompactOptions) {
	ctx := t.Context()
	opts.SplitTopics = true
	st, tbl := openTopic(t, root, "_group.m")
	evs := groupEvents(3000, 7, 0x1000, groupTopics)
	var want []outbox.Event
	txns := map[string]int64{}
	commit := func(opts FileOptions, batch []outbox.Event) {
		t.Helper()
		if err := groupCommit(t, st, tbl, opts, batch); err != nil {
			t.Fatal(err)
		}
		want = append(want, batch...)
		for name := range byTopic(batch) {
			txns[name] = batch[len(batch)-1].CommitLSN
		}
	}
	for b := range 50 {
		batch := evs[b*50 : (b+1)*50]
		if b%10 == 9 { // now and then a batch of one topic: a file of one topic
			batch = byTopic(batch)["m.a"]
		}
		commit(FileOptions{MaxFileRows: 30}, batch)
	}
	before := tbl.NumFiles()
	res, err := Compact(ctx, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if err != nil {
		t.Fatal(err)
	}
	files := checkOneTopicFiles(t, st, snap)
	checkGroupRows(t, st, snap, byTopic(want), files)
	if res.FilesRemoved != before || res.FilesAdded != len(snap.Files) || res.Rows != int64(len(want)) || len(files) != len(groupTopics) {
		t.Fatalf("result %+v; %d files before, %d after: %v", res, before, len(snap.Files), files)
	}
	checkOptimizeCommits(t, st, res.Versions)
	for name, v := range txns {
		if got := snap.Txns[relayApp+"/"+name].Version; got != v {
			t.Fatalf("txn of %s: %d, want %d", name, got, v)
		}
	}
	err = delta.ReadChanges(ctx, st, 1, -1, func(cf delta.ChangeFile) error {
		if slices.Contains(res.Versions, cf.Version) {
			return fmt.Errorf("the compaction (version %d) yielded %s", cf.Version, cf.Path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The next batches are mixed again: a run splits them beside each
	// topic's file, and the run after packs each topic's files together.
	for b := 50; b < 60; b++ {
		commit(FileOptions{}, evs[b*50:(b+1)*50])
	}
	for run := range 3 {
		if res, err = Compact(ctx, st, opts); err != nil {
			t.Fatalf("run %d: %v", run+2, err)
		}
		checkOptimizeCommits(t, st, res.Versions)
	}
	if snap, err = delta.LoadSnapshot(ctx, st, -1); err != nil {
		t.Fatal(err)
	}
	files = checkOneTopicFiles(t, st, snap)
	checkGroupRows(t, st, snap, byTopic(want), files)
	if opts.TargetFileBytes == 0 && len(snap.Files) != len(groupTopics) {
		t.Fatalf("%d files after three more runs, want one a topic: %v", len(snap.Files), files)
	}
	if len(res.Versions) != 0 {
		t.Fatalf("the last run still compacted: %+v", res)
	}
}

// TestCompactGroupFileInOrderPerTopic: a mixed file whose rows are in
// order per topic only (a snapshot's: seq counted per topic) is split, each
// topic's rows in their order; merging two such files that overlap would
// put a topic's rows out of order, and is refused: nothing is committed
// and the outputs are deleted.
func TestCompactGroupFileInOrderPerTopic(t *testing.T) {
	ctx := t.Context()
	st, tbl := openTopic(t, newLocalStore(t), "_group.m")
	snapshotFile := func(lsn int64, rows ...string) []outbox.Event {
		evs := testEvents(len(rows), len(rows), lsn)
		for i, r := range rows { // "m.a:3": topic m.a, seq 3
			name, seq, _ := strings.Cut(r, ":")
			n, err := strconv.Atoi(seq)
			if err != nil {
				t.Fatal(err)
			}
			evs[i].Topic, evs[i].Seq, evs[i].ID = name, int32(n), fmt.Sprintf("%s-%d-%d", name, lsn, n)
		}
		return evs
	}
	a := snapshotFile(0x40, "m.a:0", "m.a:1", "m.b:0", "m.a:2", "m.b:1")
	later := groupEvents(40, 4, 0x1000, groupTopics)
	for _, evs := range [][]outbox.Event{a, later[:20], later[20:]} {
		if err := groupCommit(t, st, tbl, FileOptions{}, evs); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Compact(ctx, st, CompactOptions{SplitTopics: true})
	if err != nil || res.FilesRemoved != 3 {
		t.Fatalf("compact: %+v %v", res, err)
	}
	snap, _ := delta.LoadSnapshot(ctx, st, -1)
	checkGroupRows(t, st, snap, byTopic(append(a, later...)), checkOneTopicFiles(t, st, snap))

	// Two overlapping files: m.a's rows (0x80,3) and (0x80,0) would come
	// out in this order.
	st, tbl = openTopic(t, newLocalStore(t), "_group.m")
	b1, b2 := snapshotFile(0x80, "m.b:5", "m.a:0"), snapshotFile(0x80, "m.a:3")
	adds := append(writeEvents(t, st, FileOptions{}, b1), writeEvents(t, st, FileOptions{}, b2)...)
	if _, err := tbl.Commit(ctx, delta.CommitActions{Adds: adds}); err != nil {
		t.Fatal(err)
	}
	if res, err := Compact(ctx, st, CompactOptions{SplitTopics: true}); err == nil || !strings.Contains(err.Error(), "not in (commit_lsn, seq) order") {
		t.Fatalf("compacting files a merge cannot keep in order: %+v %v", res, err)
	}
	objs, err := st.List(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if !strings.HasPrefix(o.Key, "_delta_log/") && !slices.ContainsFunc(adds, func(a delta.Add) bool { return a.Path == o.Key }) {
			t.Errorf("output %s of a refused compaction left behind", o.Key)
		}
	}
}

// TestCompactGroupWithLiveGroupCommits: a relay commits group batches (a
// txn per topic) while compactions split and pack the table; afterwards
// every topic's rows are there once, in order, in files of one topic, and
// every topic's txn is its last batch's.
func TestCompactGroupWithLiveGroupCommits(t *testing.T) {
	bothStores(t, func(t *testing.T, root storage.Store) {
		ctx := t.Context()
		st, tbl := openTopic(t, root, "_group.m")
		const batches, per = 120, 25
		evs := groupEvents(batches*per, 5, 0x5000, groupTopics)
		var wg sync.WaitGroup
		var relayErr error
		done := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done)
			for b := range batches {
				if relayErr = groupCommit(t, st, tbl, FileOptions{}, evs[b*per:(b+1)*per]); relayErr != nil {
					return
				}
			}
		}()
		var compactions, commits, conflicts int
		for running := true; running; {
			select {
			case <-done:
				running = false
			default:
			}
			res, err := Compact(ctx, st, CompactOptions{SplitTopics: true})
			if errors.Is(err, delta.ErrRewriteConflict) {
				conflicts++
			} else if err != nil {
				t.Fatalf("compaction %d: %v", compactions, err)
			}
			compactions++
			commits += len(res.Versions)
		}
		wg.Wait()
		if relayErr != nil {
			t.Fatalf("relay: %v", relayErr)
		}
		res, err := Compact(ctx, st, CompactOptions{SplitTopics: true, MinFiles: 1})
		if err != nil {
			t.Fatal(err)
		}
		commits += len(res.Versions)
		snap, err := delta.LoadSnapshot(ctx, st, -1)
		if err != nil {
			t.Fatal(err)
		}
		checkGroupRows(t, st, snap, byTopic(evs), checkOneTopicFiles(t, st, snap))
		last := map[string]int64{}
		for b := range batches {
			for name := range byTopic(evs[b*per : (b+1)*per]) {
				last[name] = evs[(b+1)*per-1].CommitLSN
			}
		}
		for name, v := range last {
			if got := snap.Txns[relayApp+"/"+name].Version; got != v {
				t.Fatalf("txn of %s: %d, want %d", name, got, v)
			}
		}
		rebased := rebasedRewrites(t, st, snap.Version)
		t.Logf("%d compaction runs, %d commits (%d rebased over a relay commit, %d runs stopped by a conflict), %d files at the end",
			compactions, commits, rebased, conflicts, len(snap.Files))
		if commits == 0 || rebased == 0 {
			t.Fatalf("no compaction committed, or none lost a race to the relay: the test did not exercise the race")
		}
	})
}

// TestCompactGroupOfManyTopics: the outputs of a run, one a topic, all
// span the run's range, so they overlap one another; with more topics
// than a merge may hold open (MaxOpenFiles, 64) the next run still splits
// the new mixed files and packs each topic's files into one, copying each
// earlier output whole when the merge reaches it, and skips nothing.
func TestCompactGroupOfManyTopics(t *testing.T) {
	ctx := t.Context()
	st, tbl := openTopic(t, newLocalStore(t), "_group.m")
	topics := make([]string, 80)
	for i := range topics {
		topics[i] = fmt.Sprintf("m.t%02d", i)
	}
	evs := testEvents(4000, 10, 0x1000)
	for i := range evs {
		evs[i].Topic = topics[(i*37)%len(topics)]
	}
	for run := range 2 {
		for b := run * 20; b < (run+1)*20; b++ {
			if err := groupCommit(t, st, tbl, FileOptions{}, evs[b*100:(b+1)*100]); err != nil {
				t.Fatal(err)
			}
		}
		res, err := Compact(ctx, st, CompactOptions{SplitTopics: true})
		if err != nil || res.Skipped != 0 || res.FilesRemoved != 20+run*len(topics) || res.FilesAdded != len(topics) {
			t.Fatalf("run %d: %+v %v", run+1, res, err)
		}
	}
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if err != nil {
		t.Fatal(err)
	}
	files := checkOneTopicFiles(t, st, snap)
	for _, name := range topics {
		if files[name] != 1 {
			t.Fatalf("topic %s has %d files, want 1", name, files[name])
		}
	}
	checkGroupRows(t, st, snap, byTopic(evs), files)
}

// TestCompactGroupOfTwoSources: two sources commit to one group table,
// each in its own LSN space, so their files overlap and may share topics:
// they are merged row by row, and each source's rows of each topic keep
// that source's order in files of one topic.
func TestCompactGroupOfTwoSources(t *testing.T) {
	ctx := t.Context()
	st, tbl := openTopic(t, newLocalStore(t), "_group.m")
	a, b := groupEvents(900, 6, 0x1000, groupTopics), groupEvents(600, 4, 0x1800, groupTopics)
	for i := range b {
		b[i].ID = "b-" + b[i].ID
	}
	sources := []struct {
		app  string
		evs  []outbox.Event
		per  int
		want map[string][]string
	}{{"deltabus-1-a", a, 30, map[string][]string{}}, {"deltabus-2-b", b, 20, map[string][]string{}}}
	for k := range 30 {
		for _, s := range sources {
			batch := s.evs[k*s.per : (k+1)*s.per]
			adds := writeEvents(t, st, FileOptions{Source: s.app}, batch)
			var txns []delta.Txn
			for _, name := range slices.Sorted(maps.Keys(byTopic(batch))) {
				txns = append(txns, delta.Txn{AppID: s.app + "/" + name, Version: batch[len(batch)-1].CommitLSN})
			}
			if _, err := tbl.Commit(ctx, delta.CommitActions{Adds: adds, Txns: txns}); err != nil {
				t.Fatal(err)
			}
			for _, e := range batch {
				s.want[e.Topic] = append(s.want[e.Topic], e.ID)
			}
		}
	}
	res, err := Compact(ctx, st, CompactOptions{SplitTopics: true})
	if err != nil || res.FilesRemoved != 60 || res.Skipped != 0 {
		t.Fatalf("compact: %+v %v", res, err)
	}
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if err != nil {
		t.Fatal(err)
	}
	files := checkOneTopicFiles(t, st, snap)
	for _, name := range groupTopics {
		rows, read := topicEvents(t, st, snap, name)
		if read != files[name] {
			t.Fatalf("a reader of %s read %d files, want %d", name, read, files[name])
		}
		got := map[string][]string{}
		for i, e := range rows {
			if i > 0 && (pos{e.CommitLSN, int64(e.Seq)}).cmp(pos{rows[i-1].CommitLSN, int64(rows[i-1].Seq)}) < 0 {
				t.Fatalf("%s: row %d is before the row it follows", name, i)
			}
			got[e.Source] = append(got[e.Source], e.ID)
		}
		for _, s := range sources {
			if !slices.Equal(got[s.app], s.want[name]) {
				t.Fatalf("%s rows of %s: %d, want %d in order", name, s.app, len(got[s.app]), len(s.want[name]))
			}
		}
	}
}
