package topicmeta

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/grouptest"
)

func relayBatch(t *testing.T, root storage.Store, appID string, pos int64, topics ...string) {
	t.Helper()
	grouptest.Batch(t, root, appID, pos, topics...)
}

// groupStore holds group m (m.*) with topics m.a, m.b and m.c in files
//
//	pos 100: m.a ×2, m.b ×1 (one file, bounds m.a-m.b, 3 rows)
//	pos 200: m.a ×3         (m.a alone)
//	pos 300: m.b, m.c        (bounds m.b-m.c, 2 rows)
//	pos  50: m.a            (another source, m.a alone)
//
// and topic orders in its own table; m.a is described.
func groupStore(t *testing.T) storage.Store {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	store, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	grouptest.Group(t, store, "m", "m.*")
	relayBatch(t, store, "deltabus-main", 100, "m.a", "m.a", "m.b", "orders")
	relayBatch(t, store, "deltabus-main", 200, "m.a", "m.a", "m.a")
	relayBatch(t, store, "deltabus-main", 300, "m.b", "m.c")
	relayBatch(t, store, "deltabus-2-other", 50, "m.a")
	if err := catalog.WriteMarker(ctx, store, catalog.Marker{AppID: "deltabus-main", Slot: "main", Database: "shop", SystemID: "7"}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []catalog.TopicMeta{{Topic: "m.a", Owner: "team-metrics", Description: "CPU samples of m.a."},
		{Topic: "m.z", Owner: "team-later", Description: "Not written yet."}} {
		if err := catalog.WriteTopicMeta(ctx, store, m); err != nil {
			t.Fatal(err)
		}
	}
	return store
}

func byTopic(infos []Info) map[string]Info {
	out := map[string]Info{}
	for _, in := range infos {
		out[in.Topic] = in
	}
	return out
}

func sources(in Info) string {
	var s []string
	for _, src := range in.Sources {
		s = append(s, src.AppID+"@"+src.TxnLSN+"/"+src.Database)
	}
	return strings.Join(s, ",")
}

// TestGroupedTopicsFromTheLogOnly: each topic of a group shows its own
// owner, description, records (exact where its files hold it alone,
// "shared" where they hold other topics too), last commit and sources
// (its txns <appId>/<topic>), and the group table's version, retention
// and columns; the group is listed with its topics. All of it is read
// from the log: with the data files deleted the listing is the same.
func TestGroupedTopicsFromTheLogOnly(t *testing.T) {
	ctx := context.Background()
	store := groupStore(t)
	l, err := LoadAll(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	got := byTopic(l.Topics)
	a, b, c, z, o := got["m.a"], got["m.b"], got["m.c"], got["m.z"], got["orders"]
	if len(l.Topics) != 5 || a.Group != "m" || a.Table != "_group.m" || !strings.HasSuffix(a.Location, "/_group.m") || o.Group != "" || o.Table != "orders" {
		t.Fatalf("placements: %+v", l.Topics)
	}
	for _, x := range []struct {
		in            Info
		alone, shared int64
		text, sources string
	}{
		{a, 4, 3, "shared", "deltabus-2-other@0/32/,deltabus-main@0/C8/shop"},
		{b, 0, 5, "shared", "deltabus-main@0/12C/shop"},
		{c, 0, 2, "shared", "deltabus-main@0/12C/shop"},
		{o, 1, 0, "1", "deltabus-main@0/64/shop"},
	} {
		if x.in.Records != x.alone || x.in.SharedRecords != x.shared || x.in.RecordsText() != x.text || sources(x.in) != x.sources {
			t.Errorf("%s: records %d shared %d (%q), sources %s; want %d, %d (%q), %s", x.in.Topic, x.in.Records, x.in.SharedRecords,
				x.in.RecordsText(), sources(x.in), x.alone, x.shared, x.text, x.sources)
		}
	}
	if a.Owner != "team-metrics" || a.Description != "CPU samples of m.a." || a.Version != 4 || a.LogRetention != "interval 30 days" || len(a.Columns) != 13 {
		t.Errorf("m.a: %+v", a)
	}
	if b.LastCommit.IsZero() || a.LastCommit.IsZero() || !b.LastCommit.Before(a.LastCommit) && !b.LastCommit.Equal(a.LastCommit) {
		t.Errorf("last commits: m.a %v (its txns at versions 2 and 4), m.b %v (version 3)", a.LastCommit, b.LastCommit)
	}
	if c.LastCommit.After(a.LastCommit) {
		t.Errorf("m.c's last commit %v after m.a's %v, whose txn is newer", c.LastCommit, a.LastCommit)
	}
	if z.Group != "m" || z.Version != -1 || !strings.Contains(z.Problem, "no event yet") || z.Owner != "team-later" {
		t.Errorf("a described topic of the group without events: %+v", z)
	}
	if len(l.Groups) != 1 {
		t.Fatalf("groups: %+v", l.Groups)
	}
	g := l.Groups[0]
	if g.Group != "m" || strings.Join(g.Topics, ",") != "m.a,m.b,m.c" || g.Records != 9 || g.Version != 4 ||
		len(g.Sources) != 2 || g.Sources[1].TxnLSN != "0/12C" || g.Sources[1].Database != "shop" {
		t.Errorf("group: %+v", g)
	}
	// The same figures without a data file: nothing but the log was read.
	dir := strings.TrimPrefix(store.String(), "file://")
	var removed int
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") && !strings.Contains(p, "_delta_log") {
			removed++
			return os.Remove(p)
		}
		return err
	})
	again, err := LoadAll(ctx, store)
	if err != nil || removed == 0 {
		t.Fatalf("after removing %d data files: %v", removed, err)
	}
	for _, in := range again.Topics {
		if w := got[in.Topic]; in.Records != w.Records || in.SharedRecords != w.SharedRecords || !in.LastCommit.Equal(w.LastCommit) {
			t.Errorf("%s read without data files: %+v, want %+v", in.Topic, in, w)
		}
	}
}

// TestApplyGroup: a grouped topic's description never reaches the shared
// table (Apply refuses it); the table carries the group's own
// description and comments, written once, and a relay writing into it
// goes on.
func TestApplyGroup(t *testing.T) {
	ctx := context.Background()
	store := groupStore(t)
	a, err := LoadTopic(ctx, store, "m.a")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Apply(ctx, store, a); !errors.Is(err, ErrShared) {
		t.Fatalf("Apply of a grouped topic: %v, want ErrShared", err)
	}
	if len(Pending([]Info{a})) != 0 {
		t.Fatal("a grouped topic is pending on its own")
	}
	gi, topics, ok, err := LoadGroup(ctx, store, "m")
	if err != nil || !ok || len(topics) != 3 || topics[0].Topic != "m.a" || topics[0].Owner != "team-metrics" || strings.Join(gi.Topics, ",") != "m.a,m.b,m.c" {
		t.Fatalf("LoadGroup: %+v %+v %t %v", gi, topics, ok, err)
	}
	if p := PendingGroups([]GroupInfo{gi}); len(p) != 1 {
		t.Fatalf("pending groups before ApplyGroup: %v", p)
	}
	v, changed, err := ApplyGroup(ctx, store, gi)
	if err != nil || !changed || v != 5 {
		t.Fatalf("ApplyGroup: %d %t %v", v, changed, err)
	}
	relayBatch(t, store, "deltabus-main", 400, "m.a", "m.b") // the live writer follows
	snap, err := delta.LoadSnapshot(ctx, storage.Sub(store, "_group.m"), -1)
	if err != nil || snap.Version != 6 || snap.Metadata.Description == nil {
		t.Fatalf("after ApplyGroup and a commit: %+v %v", snap, err)
	}
	d := *snap.Metadata.Description
	for _, want := range []string{"DeltaBus topic group m", "3 topics", "WHERE topic = 'm.a'", "Topics: m.a, m.b, m.c.", "matching m.*"} {
		if !strings.Contains(d, want) {
			t.Errorf("the group table's description %q lacks %q", d, want)
		}
	}
	if strings.Contains(d, "CPU samples") || strings.Contains(d, "team-metrics") {
		t.Errorf("a topic's own description or owner reached the shared table: %q", d)
	}
	if !strings.Contains(snap.Metadata.SchemaString, `"comment":"Topic the event was published to. This table holds the topics of group m`) ||
		!strings.Contains(snap.Metadata.SchemaString, `"comment":"Event payload, JSON text."`) {
		t.Errorf("group table's column comments: %s", snap.Metadata.SchemaString)
	}
	gi, _, _, _ = LoadGroup(ctx, store, "m")
	if _, changed, err := ApplyGroup(ctx, store, gi); changed || err != nil || len(PendingGroups([]GroupInfo{gi})) != 0 {
		t.Fatalf("second ApplyGroup: %t %v", changed, err)
	}
	// A new topic joins: the description names it.
	relayBatch(t, store, "deltabus-main", 500, "m.d")
	gi, _, _, _ = LoadGroup(ctx, store, "m")
	if _, changed, err := ApplyGroup(ctx, store, gi); !changed || err != nil || !strings.Contains(gi.Description(), "4 topics") {
		t.Fatalf("ApplyGroup after m.d joined: %t %v %q", changed, err, gi.Description())
	}
	if _, _, ok, err := LoadGroup(ctx, store, "nope"); ok || err != nil {
		t.Fatalf("LoadGroup of no group: %t %v", ok, err)
	}
}

// TestGroupDescriptionBounded: a group's description names at most 50
// topics.
func TestGroupDescriptionBounded(t *testing.T) {
	g := GroupInfo{Group: "m", Patterns: []string{"m.*", "n.*"}}
	for i := range 120 {
		g.Topics = append(g.Topics, fmt.Sprintf("m.t%03d", i))
	}
	d := g.Description()
	if !strings.Contains(d, "120 topics") || !strings.Contains(d, "m.t049 and 70 more.") || strings.Contains(d, "m.t050") || !strings.Contains(d, "matching m.*, n.*") {
		t.Fatalf("description of 120 topics: %q", d)
	}
	if d := (&GroupInfo{Group: "m", Patterns: []string{"m.*"}}).Description(); !strings.Contains(d, "WHERE topic = '<topic>'") {
		t.Fatalf("description of no topic: %q", d)
	}
}
