package doctor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/deltasink"
	"github.com/deltabus/deltabus/storage"
)

// groupsCheck runs the topic_groups check alone.
func groupsCheck(t *testing.T, st storage.Store) []Result {
	t.Helper()
	var r Report
	checkGroups(context.Background(), Options{}.withDefaults(), st, &r)
	return r.Checks
}

// TestTopicGroupsCheck: a store without groups gets no check; with groups
// it holds while their tables hold their registered topics, and fails,
// naming the fix, for a group table deleted under its topics and for a
// group definition the relay cannot read.
func TestTopicGroupsCheck(t *testing.T) {
	ctx := context.Background()
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got := groupsCheck(t, st); len(got) != 0 {
		t.Fatalf("a store without groups: %+v, want no check", got)
	}
	if err := catalog.WriteGroup(ctx, st, catalog.Group{Name: "m", Topics: []string{"m.*"}, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	s := deltasink.New(st, deltasink.Options{AppID: "deltabus-1-deltabus"})
	b := s.NewBatch()
	for _, name := range []string{"m.a", "m.b", "orders"} {
		if _, err := s.Open(ctx, name); err != nil {
			t.Fatal(err)
		}
		ev := outbox.Event{ID: uuid.NewString(), Topic: name, Key: "k", Type: "t", SchemaVersion: 1, Payload: "{}",
			OccurredAt: time.Now().UTC(), CommitLSN: 100, CommitTime: time.Now().UTC()}
		if err := b.Append(&ev); err != nil {
			t.Fatal(err)
		}
	}
	for _, table := range []string{"_group.m", "orders"} {
		if _, err := b.Commit(ctx, table, 100); err != nil {
			t.Fatal(err)
		}
	}
	if got := groupsCheck(t, st); len(got) != 1 || got[0].Status != OK || !strings.Contains(got[0].Detail, "m (2 topics)") {
		t.Fatalf("a group holding its topics: %+v", got)
	}

	g := storage.Sub(st, "_group.m")
	objs, err := g.List(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := g.Delete(ctx, o.Key); err != nil {
			t.Fatal(err)
		}
	}
	got := groupsCheck(t, st)
	if len(got) != 1 || got[0].Status != Fail || !strings.Contains(got[0].Detail, "_group.m is missing") ||
		!strings.Contains(got[0].Detail, "m.a, m.b") || !strings.Contains(got[0].Detail, "relay rebuild") {
		t.Fatalf("a deleted group table: %+v", got)
	}

	key, err := catalog.Key(catalog.KindGroup, "broken")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, key, []byte(`{"group":"broken","topics":[]}`)); err != nil {
		t.Fatal(err)
	}
	if got := groupsCheck(t, st); len(got) != 1 || got[0].Status != Fail || !strings.Contains(got[0].Detail, "broken") {
		t.Fatalf("a corrupt group definition: %+v", got)
	}
}
