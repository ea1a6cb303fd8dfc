package catalog

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/usererr"
)

var (
	srcA = Source{SystemID: "7301234567890123456", Database: "orders", Slot: "deltabus"}
	srcB = Source{SystemID: "7309999999999999999", Database: "orders", Slot: "deltabus"}
)

func TestSourceAppIDsAreDistinct(t *testing.T) {
	if srcA.AppID() == srcB.AppID() {
		t.Fatalf("two clusters with one slot name share appId %q", srcA.AppID())
	}
	if err := CheckName("relay", srcA.AppID()); err != nil {
		t.Fatal(err)
	}
	long := Source{SystemID: "18446744073709551615", Database: "d", Slot: strings.Repeat("s", 63)}
	if err := CheckName("relay", long.AppID()); err != nil {
		t.Fatalf("the longest appId is not a catalog name: %v", err)
	}
	if sys, slot, ok := SourceOfAppID(srcA.AppID()); !ok || sys != srcA.SystemID || slot != srcA.Slot {
		t.Fatalf("SourceOfAppID(%q) = %q %q %v", srcA.AppID(), sys, slot, ok)
	}
	if _, _, ok := SourceOfAppID(LegacyAppID("deltabus")); ok {
		t.Fatal("a legacy appId read as a per-source one")
	}
	for _, bad := range []Source{{Database: "d", Slot: "s"}, {SystemID: "x1", Database: "d", Slot: "s"}, {SystemID: "1", Slot: "s"}, {SystemID: "1", Database: "d", Slot: "A/b"}} {
		if _, err := ResolveAppID(context.Background(), newStore(t), bad, ""); err == nil {
			t.Errorf("ResolveAppID accepted %+v", bad)
		}
	}
}

func writeMarker(t *testing.T, s storage.Store, appID string, src Source) {
	t.Helper()
	m := Marker{AppID: appID, Slot: src.Slot, SystemID: src.SystemID, Database: src.Database, ConsistentPoint: "0/1"}
	if err := WriteMarker(context.Background(), s, m); err != nil {
		t.Fatal(err)
	}
}

func TestResolveAppID(t *testing.T) {
	ctx := context.Background()
	t.Run("first start", func(t *testing.T) {
		id, err := ResolveAppID(ctx, newStore(t), srcA, "")
		if err != nil || id.AppID != srcA.AppID() || id.Marker != nil || id.Adopted {
			t.Fatalf("%+v %v", id, err)
		}
	})
	t.Run("own marker", func(t *testing.T) {
		s := newStore(t)
		writeMarker(t, s, srcA.AppID(), srcA)
		id, err := ResolveAppID(ctx, s, srcA, "")
		if err != nil || id.AppID != srcA.AppID() || id.Marker == nil {
			t.Fatalf("%+v %v", id, err)
		}
	})
	t.Run("legacy marker of this source is adopted", func(t *testing.T) {
		s := newStore(t)
		writeMarker(t, s, LegacyAppID("deltabus"), srcA)
		id, err := ResolveAppID(ctx, s, srcA, "")
		if err != nil || id.AppID != "deltabus-deltabus" || !id.Adopted || !id.Legacy() {
			t.Fatalf("%+v %v", id, err)
		}
	})
	t.Run("legacy marker of another source is left alone", func(t *testing.T) {
		s := newStore(t)
		writeMarker(t, s, LegacyAppID("deltabus"), srcA)
		id, err := ResolveAppID(ctx, s, srcB, "")
		if err != nil || id.AppID != srcB.AppID() || id.Marker != nil || id.Adopted {
			t.Fatalf("%+v %v", id, err)
		}
	})
	t.Run("legacy marker of this cluster, another database", func(t *testing.T) {
		s := newStore(t)
		other := srcA
		other.Database = "billing"
		writeMarker(t, s, LegacyAppID("deltabus"), other)
		id, err := ResolveAppID(ctx, s, srcA, "")
		if err != nil || id.AppID != srcA.AppID() || id.Adopted {
			t.Fatalf("%+v %v", id, err)
		}
	})
	t.Run("slot re-created in another database", func(t *testing.T) {
		s := newStore(t)
		other := srcA
		other.Database = "billing"
		writeMarker(t, s, srcA.AppID(), other)
		_, err := ResolveAppID(ctx, s, srcA, "")
		assertRefusal(t, err, srcA.String(), other.String())
	})
	t.Run("legacy marker without a system identifier", func(t *testing.T) {
		s := newStore(t)
		writeMarker(t, s, LegacyAppID("deltabus"), Source{Slot: "deltabus"})
		_, err := ResolveAppID(ctx, s, srcA, "")
		assertRefusal(t, err, srcA.String(), "--app-id deltabus-deltabus")
		// The operator's explicit claim takes it.
		id, err := ResolveAppID(ctx, s, srcA, "deltabus-deltabus")
		if err != nil || id.AppID != "deltabus-deltabus" || id.Marker == nil {
			t.Fatalf("%+v %v", id, err)
		}
	})
	t.Run("explicit appId of another source", func(t *testing.T) {
		s := newStore(t)
		writeMarker(t, s, "shared", srcA)
		_, err := ResolveAppID(ctx, s, srcB, "shared")
		assertRefusal(t, err, srcA.String(), srcB.String())
	})
}

func assertRefusal(t *testing.T, err error, mentions ...string) {
	t.Helper()
	var ue *usererr.Error
	if !errors.As(err, &ue) {
		t.Fatalf("want a one-line operator error, got %v", err)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Fatalf("the refusal is not one line: %q", msg)
	}
	for _, m := range mentions {
		if !strings.Contains(msg, m) {
			t.Errorf("the refusal %q does not mention %q", msg, m)
		}
	}
}

// TestRebuildObjectsPerSource: two sources hold, rebuild and resolve one
// shared topic each on its own, and a per-source relay never reads the
// legacy per-topic objects (another relay's, in an upgraded store).
func TestRebuildObjectsPerSource(t *testing.T) {
	ctx, s := context.Background(), newStore(t)
	a, b := srcA.AppID(), srcB.AppID()
	if err := WriteRebuildState(ctx, s, RebuildState{Topic: "orders", AppID: a, Paused: "p1", PausedAt: "0/20"}); err != nil {
		t.Fatal(err)
	}
	if st, ok, err := ReadRebuildState(ctx, s, b, "orders"); err != nil || ok || st.Paused != "" || st.AppID != b {
		t.Fatalf("source B read source A's hold: %+v %v %v", st, ok, err)
	}
	if err := WriteRebuildRecord(ctx, s, RebuildRecord{ID: "r1", Topic: "orders", AppID: a}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := ReadRebuildRecord(ctx, s, b, "orders"); ok {
		t.Fatal("source B read source A's rebuild record")
	}
	in := Intent{ID: NewID(), Topic: "orders", AppID: a, Kind: IntentRebuild}
	if err := WriteIntent(ctx, s, in); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := ReadIntent(ctx, s, "orders", b, in.ID); ok {
		t.Fatal("source B read source A's intent")
	}
	if err := s.Put(ctx, Prefix+"rebuilds/orders/state.json", []byte(`{"topic":"orders","paused":"legacy","pausedAt":"0/9"}`)); err != nil {
		t.Fatal(err)
	}
	if st, ok, _ := ReadRebuildState(ctx, s, b, "orders"); ok || st.Paused != "" {
		t.Fatalf("a per-source relay read the legacy state: %+v", st)
	}
	if st, ok, _ := ReadRebuildState(ctx, s, "deltabus-deltabus", "orders"); !ok || st.Paused != "legacy" {
		t.Fatalf("the adopted legacy relay lost its state: %+v %v", st, ok)
	}
	states, err := ListRebuildStates(ctx, s, "orders")
	if err != nil || len(states) != 2 {
		t.Fatalf("ListRebuildStates = %+v, %v; want A's and the legacy one", states, err)
	}
	got := map[string]string{}
	for _, st := range states {
		got[st.AppID] = st.Paused
	}
	if got[a] != "p1" || got[""] != "legacy" {
		t.Fatalf("ListRebuildStates = %+v", states)
	}
}

// blindStore is a store whose PutIfAbsent overwrites, as an S3 server that
// ignores If-None-Match does.
type blindStore struct{ storage.Store }

func (b blindStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return b.Put(ctx, key, data)
}

func TestCheckWritableProvesConditionalWrites(t *testing.T) {
	ctx, s := context.Background(), newStore(t)
	if err := CheckWritable(ctx, s, srcA.AppID()); err != nil {
		t.Fatalf("local store: %v", err)
	}
	err := CheckWritable(ctx, blindStore{s}, srcA.AppID())
	if !errors.Is(err, ErrNoConditionalWrites) {
		t.Fatalf("a store that ignores put-if-absent passed: %v", err)
	}
	objs, err := s.List(ctx, Prefix+"probes/", "")
	if err != nil || len(objs) != 0 {
		t.Fatalf("probes left behind: %v %v", objs, err)
	}
}
