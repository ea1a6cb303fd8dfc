package topic

import (
	"testing"
)

// TestSourceRunsReadBack: a source column counted while its rows hold one
// value (putSource) reads back row for row whatever comes after: another
// source, a NULL (no source), rows staged to a temporary file and
// restored, several row groups; with the writer's own source and with
// each event's.
func TestSourceRunsReadBack(t *testing.T) {
	runs := map[string][]string{
		"one":              {"a", "a", "a", "a", "a", "a", "a", "a", "a", "a", "a", "a", "a", "a", "a", "a", "a", "a"},
		"then another":     {"a", "a", "a", "b", "b", "a", "a", "a", "a", "a", "a", "a", "a", "a", "a", "a", "a", "a"},
		"then null":        {"a", "a", "", "a", "a", "a", "a", "a", "a", "", "", "", "a", "a", "a", "a", "a", "a"},
		"null first":       {"", "a", "a", "a", "a", "a", "a", "a", "a", "a", "a", "a", "a", "a", "a", "a", "a", "a"},
		"all null":         {"", "", "", "", "", "", "", "", "", "", "", "", "", "", "", "", "", ""},
		"each row its own": {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r"},
	}
	for name, sources := range runs {
		for _, stageAt := range []int{-1, 2, 5, 11} {
			st := newLocalStore(t)
			evs := testEvents(len(sources), 3, 0x1000)
			for i := range evs {
				evs[i].Source = "deltabus-" + sources[i]
				if sources[i] == "" {
					evs[i].Source = ""
				}
			}
			w := NewFileWriter(st, FileOptions{RowGroupRows: 7})
			for i := range evs {
				if i == stageAt {
					if err := w.stageRows(); err != nil {
						t.Fatal(err)
					}
				}
				if err := w.Append(&evs[i]); err != nil {
					t.Fatal(err)
				}
			}
			adds, err := w.Close(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			got := readAll(t, st, adds)
			if len(got) != len(evs) {
				t.Fatalf("%s, staged at %d: %d events read back, want %d", name, stageAt, len(got), len(evs))
			}
			for i := range got {
				if got[i].Source != evs[i].Source || !eventsEqual(got[i], evs[i]) {
					t.Fatalf("%s, staged at %d: event %d read back with source %q, want %q", name, stageAt, i, got[i].Source, evs[i].Source)
				}
			}
		}
	}
	// The writer's own source: every row, whatever the events say.
	st := newLocalStore(t)
	evs := testEvents(30, 4, 0x2000)
	evs[3].Source = "deltabus-other"
	adds := writeEvents(t, st, FileOptions{RowGroupRows: 8, Source: "deltabus-own"}, evs)
	for i, e := range readAll(t, st, adds) {
		if e.Source != "deltabus-own" {
			t.Fatalf("event %d read back with source %q, want the writer's own", i, e.Source)
		}
	}
}
