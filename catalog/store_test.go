package catalog

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/deltabus/deltabus/storage"
)

func newStore(t *testing.T) storage.Store {
	t.Helper()
	s, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRegistry(t *testing.T) {
	ctx, s := context.Background(), newStore(t)
	for _, n := range []string{"payments", "orders", "_dead_letter", "a.relay"} {
		if err := RegisterTopic(ctx, s, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := RegisterTopic(ctx, s, "../escape"); err == nil {
		t.Fatal("registered a topic named ../escape")
	}
	// A stray object under topics/ is not a topic.
	if err := s.Put(ctx, Prefix+"topics/Bad Name", nil); err != nil {
		t.Fatal(err)
	}
	got, err := ListTopics(ctx, s)
	if err != nil || !slices.Equal(got, []string{"_dead_letter", "a.relay", "orders", "payments"}) {
		t.Fatalf("ListTopics = %q, %v", got, err)
	}
	if p, err := ReadPlacement(ctx, s, "orders", nil); !p.Registered || err != nil {
		t.Fatalf("ReadPlacement(orders) = %+v, %v; want registered", p, err)
	}
	if p, err := ReadPlacement(ctx, s, "tenants", nil); p.Registered || err != nil {
		t.Fatalf("ReadPlacement(tenants) = %+v, %v; want not registered", p, err)
	}
}

// TestRebuildObjectsOfLookalikeTopics: topic "a.relay"'s record and topic
// "a"'s state are two objects (they shared a key in the first layout).
func TestRebuildObjectsOfLookalikeTopics(t *testing.T) {
	ctx, s := context.Background(), newStore(t)
	if err := WriteRebuildRecord(ctx, s, RebuildRecord{ID: "r1", Topic: "a.relay", AppID: "deltabus-main", SeamEnd: "0/10"}); err != nil {
		t.Fatal(err)
	}
	if err := WriteRebuildState(ctx, s, RebuildState{Topic: "a", AppID: "deltabus-main", Paused: "p1", PausedAt: "0/20"}); err != nil {
		t.Fatal(err)
	}
	rec, ok, err := ReadRebuildRecord(ctx, s, "deltabus-main", "a.relay")
	if err != nil || !ok || rec.ID != "r1" {
		t.Fatalf("record of a.relay: %+v %v %v", rec, ok, err)
	}
	st, ok, err := ReadRebuildState(ctx, s, "deltabus-main", "a")
	if err != nil || !ok || st.Paused != "p1" || st.PausedAtLSN() != 0x20 {
		t.Fatalf("state of a: %+v %v %v", st, ok, err)
	}
	if st, ok, _ := ReadRebuildState(ctx, s, "deltabus-main", "a.relay"); ok || st.Topic != "a.relay" || st.Paused != "" {
		t.Fatalf("state of a.relay: %+v %v; want none", st, ok)
	}
}

// TestLegacyLayoutIsRead: objects of the first layout are read when the
// new key is absent, and only when they name the topic asked for.
func TestLegacyLayoutIsRead(t *testing.T) {
	ctx, s := context.Background(), newStore(t)
	put := func(key, body string) {
		if err := s.Put(ctx, Prefix+key, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	put("rebuilds/orders.json", `{"id":"old","topic":"orders","seamEnd":"0/5"}`)
	put("rebuilds/orders.relay.json", `{"topic":"orders","resolvedThrough":"0/9"}`)
	// Topic "a.relay"'s legacy record sits where topic "a"'s legacy state was.
	put("rebuilds/a.relay.json", `{"id":"x","topic":"a.relay"}`)
	if rec, ok, err := ReadRebuildRecord(ctx, s, "deltabus-main", "orders"); err != nil || !ok || rec.ID != "old" {
		t.Fatalf("legacy record: %+v %v %v", rec, ok, err)
	}
	if st, ok, err := ReadRebuildState(ctx, s, "deltabus-main", "orders"); err != nil || !ok || st.ResolvedLSN() != 9 {
		t.Fatalf("legacy state: %+v %v %v", st, ok, err)
	}
	if st, ok, err := ReadRebuildState(ctx, s, "deltabus-main", "a"); err != nil || ok || st.Paused != "" {
		t.Fatalf("state of a read from a.relay's record: %+v %v %v", st, ok, err)
	}
	if err := WriteRebuildState(ctx, s, RebuildState{Topic: "orders", AppID: "deltabus-main", ResolvedThrough: "0/30"}); err != nil {
		t.Fatal(err)
	}
	if st, _, _ := ReadRebuildState(ctx, s, "deltabus-main", "orders"); st.ResolvedLSN() != 0x30 {
		t.Fatalf("the new state does not win over the legacy one: %+v", st)
	}
}

func TestIntentRoundTrip(t *testing.T) {
	ctx, s := context.Background(), newStore(t)
	in := Intent{ID: NewID(), Topic: "orders", AppID: "deltabus-main", Kind: IntentRebuild}
	if err := WriteIntent(ctx, s, in); err != nil {
		t.Fatal(err)
	}
	got, ok, err := ReadIntent(ctx, s, "orders", "deltabus-main", in.ID)
	if err != nil || !ok || got.ID != in.ID || got.Kind != IntentRebuild || got.Created.IsZero() {
		t.Fatalf("ReadIntent = %+v %v %v", got, ok, err)
	}
	if _, ok, err := ReadIntent(ctx, s, "orders", "deltabus-main", "../../relays/x"); ok || err != nil {
		t.Fatalf("a hostile id read something: %v %v", ok, err)
	}
	if err := DeleteIntent(ctx, s, "orders", "deltabus-main", in.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := ReadIntent(ctx, s, "orders", "deltabus-main", in.ID); ok {
		t.Fatal("intent still there after DeleteIntent")
	}
}

func TestMarkerRoundTrip(t *testing.T) {
	ctx, s := context.Background(), newStore(t)
	if _, ok, err := ReadMarker(ctx, s, "deltabus-main"); ok || err != nil {
		t.Fatalf("marker in an empty store: %v %v", ok, err)
	}
	m := Marker{AppID: "deltabus-main", Slot: "main", ConsistentPoint: "0/1", Timeline: 2,
		Epochs: []Epoch{{Timeline: 2, Start: "0/3000000", Offset: 4096}}}
	if err := WriteMarker(ctx, s, m); err != nil {
		t.Fatal(err)
	}
	got, ok, err := ReadMarker(ctx, s, "deltabus-main")
	if err != nil || !ok || !reflect.DeepEqual(got, m) {
		t.Fatalf("ReadMarker = %+v %v %v", got, ok, err)
	}
	if err := s.Put(ctx, Prefix+"relays/deltabus-bad.json", []byte("{")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadMarker(ctx, s, "deltabus-bad"); err == nil {
		t.Fatal("a corrupt marker was read without error")
	}
}
