package catalog

import (
	"testing"

	"github.com/jackc/pglogrepl"
)

func TestPGSnapshotVisible(t *testing.T) {
	cases := []struct {
		snap string
		xid  uint32
		want bool
	}{
		{"100:105:100,103", 99, true},   // ended before xmin
		{"100:105:100,103", 100, false}, // in progress
		{"100:105:100,103", 101, true},  // committed between xmin and xmax
		{"100:105:100,103", 103, false},
		{"100:105:100,103", 104, true},
		{"100:105:100,103", 105, false}, // started after the snapshot
		{"100:105:100,103", 4000, false},
		{"100:100:", 99, true},
		{"100:100:", 100, false},
		// xid8 values past the first wraparound: compared by their low 32 bits.
		{"4294967390:4294967400:4294967395", 94, true},  // epoch 1, xid 94
		{"4294967390:4294967400:4294967395", 99, false}, // in xip
		{"4294967390:4294967400:4294967395", 104, false},
		{"4294967390:4294967400:4294967395", 4294967290, true}, // epoch 0, long ago
		// xmin just below a wraparound, xmax just past it.
		{"4294967290:4294967306:4294967295", 4294967294, true},
		{"4294967290:4294967306:4294967295", 4294967295, false},
		{"4294967290:4294967306:4294967295", 5, true},
		{"4294967290:4294967306:4294967295", 10, false},
	}
	for _, c := range cases {
		s, err := ParsePGSnapshot(c.snap)
		if err != nil {
			t.Fatalf("%s: %v", c.snap, err)
		}
		if got := s.Visible(c.xid); got != c.want {
			t.Errorf("snapshot %s, xid %d: visible=%v, want %v", c.snap, c.xid, got, c.want)
		}
	}
	for _, bad := range []string{"", "1:2", "a:2:", "1:b:", "1:2:x", "1:2:3,"} {
		if _, err := ParsePGSnapshot(bad); err == nil {
			t.Errorf("ParsePGSnapshot(%q) accepted", bad)
		}
	}
}

func TestSeamCovers(t *testing.T) {
	snap, _ := ParsePGSnapshot("100:105:102")
	s := &Seam{From: 1000, To: 2000, Snap: snap}
	for _, c := range []struct {
		lsn  uint64
		xid  uint32
		want bool
	}{
		{999, 101, false},  // before the seam: the txn version decides
		{1000, 101, true},  // visible in the snapshot: came with it
		{1500, 102, false}, // in progress at the snapshot: streamed
		{1999, 106, false}, // started after
		{2000, 101, false}, // at or after Q nothing is visible
	} {
		if got := s.Covers(lsnOf(c.lsn), c.xid); got != c.want {
			t.Errorf("covers(%d, %d) = %v, want %v", c.lsn, c.xid, got, c.want)
		}
	}
	var none *Seam
	if none.Covers(1500, 101) {
		t.Error("a nil seam covers nothing")
	}
}

func lsnOf(v uint64) pglogrepl.LSN { return pglogrepl.LSN(v) }

func TestRecordSeam(t *testing.T) {
	rec := RebuildRecord{Topic: "orders", TxnVersion: 1000, SeamEnd: "0/7D0", Snapshot: "100:105:102"}
	if s, err := rec.Seam(999, Positions{}); err != nil || s != nil {
		t.Fatalf("table before the rebuild: seam %v, %v; want none", s, err)
	}
	s, err := rec.Seam(1000, Positions{})
	if err != nil || s == nil || s.From != 1001 || s.To != 2000 {
		t.Fatalf("table at the rebuild: seam %+v, %v; want [1001, 2000)", s, err)
	}
	if s, _ := rec.Seam(2000, Positions{}); s != nil {
		t.Fatal("a table past the seam end needs no seam")
	}
	rec.Snapshot = "bad"
	if _, err := rec.Seam(1000, Positions{}); err == nil {
		t.Fatal("a corrupt snapshot in the record was accepted")
	}
}
