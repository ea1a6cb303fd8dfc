package catalog

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
)

func TestGroupCheck(t *testing.T) {
	for _, g := range []Group{
		{Name: "metrics", Topics: []string{"metrics.*"}},
		{Name: "m-1", Topics: []string{"a.?", "b.[a-c]*"}, CommitInterval: "900ms"},
	} {
		if err := g.Check(); err != nil {
			t.Errorf("%+v: %v", g, err)
		}
	}
	for _, g := range []Group{
		{Name: "_internal", Topics: []string{"a"}},
		{Name: "Upper", Topics: []string{"a"}},
		{Name: "ok"},
		{Name: "ok", Topics: []string{"[unclosed"}},
		{Name: "ok", Topics: []string{"_dead_letter"}},
		{Name: "ok", Topics: []string{"a/b"}},
		{Name: "ok", Topics: []string{"a"}, CommitInterval: "soon"},
		{Name: "ok", Topics: []string{"a"}, CommitInterval: "-1s"},
	} {
		if err := g.Check(); err == nil {
			t.Errorf("%+v: accepted", g)
		}
	}
}

func TestGroupMatches(t *testing.T) {
	g := Group{Name: "m", Topics: []string{"metrics.*", "audit.login"}}
	for topic, want := range map[string]bool{"metrics.cpu": true, "metrics.": true, "audit.login": true, "audit.logout": false,
		"orders": false, "_dead_letter": false} {
		if got := g.Matches(topic); got != want {
			t.Errorf("Matches(%q) = %v, want %v", topic, got, want)
		}
	}
}

// A group is written once: the same definition again is a no-op, another
// one is refused (topics it placed would not move).
func TestWriteGroupOnce(t *testing.T) {
	ctx, st := context.Background(), newStore(t)
	g := Group{Name: "m", Topics: []string{"metrics.*"}}
	for range 2 {
		if err := WriteGroup(ctx, st, g); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteGroup(ctx, st, Group{Name: "m", Topics: []string{"other.*"}}); err == nil {
		t.Fatal("a changed group was accepted")
	}
	if err := WriteGroup(ctx, st, Group{Name: "a", Topics: []string{"metrics.cpu"}}); err != nil {
		t.Fatal(err)
	}
	gs, err := ListGroups(ctx, st)
	if err != nil || len(gs) != 2 || gs[0].Name != "a" || gs[1].Name != "m" {
		t.Fatalf("ListGroups = %+v, %v; want a, m", gs, err)
	}
	// The first group in name order that matches wins.
	if g, ok := MatchGroup(gs, "metrics.cpu"); !ok || g.Name != "a" {
		t.Fatalf("MatchGroup(metrics.cpu) = %+v, %v; want group a", g, ok)
	}
}

// A registry entry decides where a topic lives: a topic registered with
// its own table stays there whatever group matches it later.
func TestPlacementFollowsTheRegistry(t *testing.T) {
	ctx, st := context.Background(), newStore(t)
	groups := []Group{{Name: "m", Topics: []string{"metrics.*"}}}
	if err := RegisterTopic(ctx, st, "metrics.old"); err != nil {
		t.Fatal(err)
	}
	p, err := ReadPlacement(ctx, st, "metrics.old", groups)
	if err != nil || p.Shared() || !p.Registered || p.Group() != "" {
		t.Fatalf("registered own table: %+v, %v", p, err)
	}
	p, err = ReadPlacement(ctx, st, "metrics.new", groups)
	if err != nil || p.Table != "_group.m" || p.Registered || p.Group() != "m" {
		t.Fatalf("new topic of a group: %+v, %v", p, err)
	}
	if got := p.TxnAppID("deltabus-1-s"); got != "deltabus-1-s/metrics.new" {
		t.Fatalf("TxnAppID = %q", got)
	}
	if app, topic, shared := SplitTxnAppID(p.TxnAppID("deltabus-1-s")); app != "deltabus-1-s" || topic != "metrics.new" || !shared {
		t.Fatalf("SplitTxnAppID = %q, %q, %v", app, topic, shared)
	}
	if app, _, shared := SplitTxnAppID(TxnAppID("deltabus-1-s", "orders", false)); app != "deltabus-1-s" || shared {
		t.Fatalf("SplitTxnAppID of an own table's txn = %q, %v", app, shared)
	}
	p.TableID, p.Registered = "id-1", true
	if err := Register(ctx, st, p); err != nil {
		t.Fatal(err)
	}
	if err := Register(ctx, st, p); err != nil {
		t.Fatalf("registering the same placement again: %v", err)
	}
	got, err := ReadPlacement(ctx, st, "metrics.new", nil)
	if err != nil || got != p {
		t.Fatalf("read back %+v, %v; want %+v", got, err, p)
	}
	// A writer that placed the topic in its own table meanwhile loses.
	if err := RegisterTopic(ctx, st, "metrics.new"); !errors.Is(err, ErrPlacementRace) {
		t.Fatalf("own-table registration of a grouped topic: %v, want ErrPlacementRace", err)
	}
	if err := Register(ctx, st, Placement{Topic: "metrics.old", Table: "_group.m", TableID: "x"}); !errors.Is(err, ErrPlacementRace) {
		t.Fatalf("grouping a topic with its own table: %v, want ErrPlacementRace", err)
	}
	// A rebuild into a replaced group table records the new table id.
	p.TableID = "id-2"
	if err := Reregister(ctx, st, p); err != nil {
		t.Fatal(err)
	}
	if got, _ := ReadPlacement(ctx, st, "metrics.new", nil); got.TableID != "id-2" {
		t.Fatalf("after Reregister: %+v", got)
	}
}

func TestCorruptEntryIsAnError(t *testing.T) {
	ctx, st := context.Background(), newStore(t)
	key, _ := Key(KindTopic, "t")
	for _, body := range []string{`{"topic":"t","table":"../x"}`, `{"topic":"u","table":"_group.m"}`, `{not json`} {
		if err := st.Put(ctx, key, []byte(body)); err != nil {
			t.Fatal(err)
		}
		if p, err := ReadPlacement(ctx, st, "t", nil); err == nil {
			t.Errorf("entry %s read as %+v", body, p)
		}
	}
}

// An internal topic has its own table whatever the groups, and an entry
// that places it in a group is corrupt.
func TestInternalTopicPlacement(t *testing.T) {
	ctx, st := context.Background(), newStore(t)
	all := []Group{{Name: "all", Topics: []string{"*"}}}
	if p, err := ReadPlacement(ctx, st, "_dead_letter", all); err != nil || p.Shared() || p.Registered {
		t.Fatalf("internal topic not registered placed %+v, %v", p, err)
	}
	if err := RegisterTopic(ctx, st, "_dead_letter"); err != nil {
		t.Fatal(err)
	}
	if p, err := ReadPlacement(ctx, st, "_dead_letter", all); err != nil || p.Shared() || !p.Registered {
		t.Fatalf("internal topic registered placed %+v, %v", p, err)
	}
	key, _ := Key(KindTopic, "_dead_letter")
	if err := st.Put(ctx, key, []byte(`{"topic":"_dead_letter","table":"_group.all","tableId":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if p, err := ReadPlacement(ctx, st, "_dead_letter", all); err == nil {
		t.Fatalf("an entry placing an internal topic in a group read as %+v", p)
	}
}

// Replaced is true only of a registered grouped topic whose table has
// another id now.
func TestPlacementReplaced(t *testing.T) {
	p := Placement{Topic: "m.a", Table: "_group.m", TableID: "id-1", Registered: true}
	if p.Replaced("id-1") || !p.Replaced("id-2") {
		t.Fatalf("Replaced of %+v", p)
	}
	for _, q := range []Placement{{Topic: "m.a", Table: "_group.m", TableID: "id-1"}, {Topic: "m.a", Table: "_group.m", Registered: true},
		{Topic: "orders", Table: "orders", Registered: true}} {
		if q.Replaced("id-2") {
			t.Errorf("Replaced of %+v", q)
		}
	}
}

// ListTables names each registered topic's table once.
func TestListTables(t *testing.T) {
	ctx, st := context.Background(), newStore(t)
	for _, p := range []Placement{{Topic: "m.a", Table: "_group.m", TableID: "x"}, {Topic: "m.b", Table: "_group.m", TableID: "x"},
		{Topic: "orders", Table: "orders"}} {
		if err := Register(ctx, st, p); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ListTables(ctx, st)
	if err != nil || strings.Join(got, ",") != "_group.m,orders" {
		t.Fatalf("ListTables = %q, %v", got, err)
	}
}

// TestWriteGroupRace: two operators create one group with different
// patterns at once, each having read that it did not exist: exactly one
// wins, the other is told what is there, and the group is the winner's.
func TestWriteGroupRace(t *testing.T) {
	ctx := context.Background()
	st := storage.NewFaulty(newStore(t))
	st.DelayNth(storage.OpGet, 1, 300*time.Millisecond) // both reads see no group yet
	st.DelayNth(storage.OpGet, 2, 300*time.Millisecond)
	defs := []Group{{Name: "m", Topics: []string{"metrics.*"}}, {Name: "m", Topics: []string{"audit.*"}}}
	errs := make([]error, len(defs))
	var wg sync.WaitGroup
	for i, g := range defs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = WriteGroup(ctx, st, g) }()
	}
	wg.Wait()
	won := slices.IndexFunc(errs, func(err error) bool { return err == nil })
	if won < 0 || slices.ContainsFunc(errs[won+1:], func(err error) bool { return err == nil }) {
		t.Fatalf("errors %v: want exactly one creator to win", errs)
	}
	lost := errs[1-won]
	if !strings.Contains(lost.Error(), "exists with topics "+defs[won].Topics[0]) {
		t.Fatalf("the loser is told %v", lost)
	}
	g, ok, err := ReadGroup(ctx, st, "m")
	if err != nil || !ok || !slices.Equal(g.Topics, defs[won].Topics) {
		t.Fatalf("stored %+v %v %v, want the winner's", g, ok, err)
	}
	// An ambiguous write (it landed, the caller saw an error) retried is
	// the same group, not a conflict.
	amb := storage.NewFaulty(newStore(t))
	amb.FailAfterNth(storage.OpPutIfAbsent, 1, nil)
	if err := WriteGroup(ctx, amb, defs[0]); err == nil {
		t.Fatal("the injected fault was not reported")
	}
	if err := WriteGroup(ctx, amb, defs[0]); err != nil {
		t.Fatalf("retry after an ambiguous write: %v", err)
	}
}
