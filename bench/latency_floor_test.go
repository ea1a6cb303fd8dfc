package bench

import (
	"strings"
	"testing"
	"time"
)

func TestCommitTime(t *testing.T) {
	at, ok, err := commitTime("COMMIT 750 (at 2026-12-05 17:02:43.12345+00)")
	if err != nil || !ok {
		t.Fatalf("commitTime: ok=%v err=%v", ok, err)
	}
	if want := time.Date(2026, 12, 5, 17, 2, 43, 123450000, time.UTC); !at.Equal(want) {
		t.Fatalf("commitTime = %v, want %v", at, want)
	}
	for _, line := range []string{"BEGIN 750", "table public.outbox: INSERT: id[bigint]:1", "COMMIT 751"[:5]} {
		if _, ok, err := commitTime(line); ok || err != nil {
			t.Errorf("commitTime(%q): ok=%v err=%v, want neither", line, ok, err)
		}
	}
	if _, _, err := commitTime("COMMIT 752"); err == nil {
		t.Error("a COMMIT line without its time: no error")
	}
}

func TestReadCommitsStopsAtN(t *testing.T) {
	in := "BEGIN 1\ntable public.outbox: INSERT: x\nCOMMIT 1 (at 2026-12-05 17:02:43+00)\nBEGIN 2\nCOMMIT 2 (at 2026-12-05 17:02:44.5+00)\nCOMMIT 3 (at 2026-12-05 17:02:45+00)\n"
	d := readCommits(strings.NewReader(in), 2)
	if d.err != nil || len(d.lat) != 2 {
		t.Fatalf("readCommits: %d latencies, err %v; want 2, nil", len(d.lat), d.err)
	}
}
