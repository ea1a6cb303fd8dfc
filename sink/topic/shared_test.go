package topic

import "testing"

// A file of several topics bounds its topic column exactly, so a reader of
// one topic skips files whose bounds exclude it and reads the others.
func TestMixedFileTopicBounds(t *testing.T) {
	st := newLocalStore(t)
	evs := testEvents(6, 2, 0x100)
	for i, name := range []string{"m.b", "m.d", "m.b", "m.c", "m.d", "m.b"} {
		evs[i].Topic = name
	}
	adds := writeEvents(t, st, FileOptions{}, evs)
	if len(adds) != 1 {
		t.Fatalf("%d files, want 1", len(adds))
	}
	for topic, want := range map[string]bool{"m.a": false, "m.b": true, "m.c": true, "m.d": true, "m.e": false, "orders": false} {
		if got := MayHold(adds[0].Stats, topic); got != want {
			t.Errorf("MayHold(%s) = %v, want %v (stats %s)", topic, got, want, adds[0].Stats)
		}
	}
	if OnlyTopic(adds[0].Stats, "m.b") {
		t.Errorf("OnlyTopic(m.b) of a file of three topics")
	}
	single := writeEvents(t, newLocalStore(t), FileOptions{}, testEvents(3, 1, 0x100))
	if !OnlyTopic(single[0].Stats, "orders") || OnlyTopic(single[0].Stats, "order") {
		t.Errorf("OnlyTopic of a file of orders alone: stats %s", single[0].Stats)
	}
	got := readAll(t, st, adds)
	for i := range got {
		if got[i].Topic != evs[i].Topic || got[i].ID != evs[i].ID {
			t.Fatalf("row %d: %s/%s, want %s/%s", i, got[i].Topic, got[i].ID, evs[i].Topic, evs[i].ID)
		}
	}
}

// Files without topic bounds (stats missing, or written before topic
// bounds were) may hold any topic: nothing is skipped on a guess.
func TestMayHoldWithoutBounds(t *testing.T) {
	for _, stats := range []string{"", `{"numRecords":3}`, `{"minValues":{"topic":"a"}}`, `not json`} {
		if !MayHold(stats, "x") {
			t.Errorf("MayHold(%q) = false, want true", stats)
		}
	}
}

// TestMayHoldLSNs: a file is skipped only when its stats exclude the
// commit LSN range or, every row having a source, the source.
func TestMayHoldLSNs(t *testing.T) {
	stats := `{"numRecords":3,"minValues":{"commit_lsn":100,"source":"a"},"maxValues":{"commit_lsn":200,"source":"b"},"nullCount":{"source":0}}`
	for _, c := range []struct {
		source string
		lo, hi int64
		want   bool
	}{
		{"a", 0, 99, false}, {"a", 201, 300, false}, {"a", 150, 160, true}, {"a", 200, 200, true}, {"a", 0, 100, true},
		{"c", 0, 1000, false}, {"", 0, 1000, true}, {"ab", 0, 1000, true},
	} {
		if got := MayHoldLSNs(stats, c.source, c.lo, c.hi); got != c.want {
			t.Errorf("MayHoldLSNs(%q, [%d, %d]) = %v, want %v", c.source, c.lo, c.hi, got, c.want)
		}
	}
	nulls := `{"minValues":{"source":"a"},"maxValues":{"source":"a"},"nullCount":{"source":2}}`
	if !MayHoldLSNs(nulls, "z", 0, 10) || !MayHoldLSNs("", "z", 0, 10) || !MayHoldLSNs("{", "z", 0, 10) {
		t.Error("a file with null sources, no stats or unreadable stats was skipped")
	}
}
