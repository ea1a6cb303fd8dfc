package catalog

import (
	"math/rand/v2"
	"testing"

	"github.com/jackc/pglogrepl"
)

// TestPositionsAfterAFork: timeline 1 published up to 0/5000 (position
// 0x5000); timeline 2 forked at 0/3000. Its transactions must get
// positions above 0x5000, the shared history keeps its own, and a topic at
// any position of the abandoned stretch holds the shared history only.
func TestPositionsAfterAFork(t *testing.T) {
	es, err := Next(nil, 2, 0x3000, 0x5000)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Start != "0/3000" || es[0].Offset != 0x2001 {
		t.Fatalf("epochs %+v, want one from 0/3000 with offset 0x2001", es)
	}
	p, err := NewPositions(es)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		lsn pglogrepl.LSN
		pos int64
	}{{0x10, 0x10}, {0x2fff, 0x2fff}, {0x3000, 0x5001}, {0x4000, 0x6001}} {
		if got := p.Pos(c.lsn); got != c.pos {
			t.Errorf("Pos(%s) = %#x, want %#x", c.lsn, got, c.pos)
		}
	}
	for _, c := range []struct{ v, through int64 }{
		{-1, -1}, {0x10, 0x10}, {0x2fff, 0x2fff},
		{0x3000, 0x2fff}, {0x4800, 0x2fff}, {0x5000, 0x2fff}, // the abandoned stretch
		{0x5001, 0x3000}, {0x6001, 0x4000},
	} {
		if got := p.Through(c.v); got != c.through {
			t.Errorf("Through(%#x) = %#x, want %#x", c.v, got, c.through)
		}
	}
}

// TestNoEpochWithoutPhantoms: a fork past everything the topics hold (a
// standby that had every published transaction, a synchronised failover
// slot) keeps positions equal to commit LSNs.
func TestNoEpochWithoutPhantoms(t *testing.T) {
	es, err := Next(nil, 2, 0x3000, 0x2fff)
	if err != nil || len(es) != 0 {
		t.Fatalf("Next = %+v, %v; want no epoch", es, err)
	}
	p, _ := NewPositions(es)
	if !p.Identity() || p.Pos(0x4000) != 0x4000 || p.Through(0x4000) != 0x4000 {
		t.Fatal("positions without an epoch must be commit LSNs")
	}
}

// TestPositionsProperties: over random chains of forks, Pos is strictly
// increasing, a new epoch lifts its fork above everything published, and
// Through is Pos's inverse on the current timeline.
func TestPositionsProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 500; round++ {
		var es []Epoch
		fork, highest := pglogrepl.LSN(0), int64(0)
		for tl := uint32(2); tl < uint32(2+rng.IntN(5)); tl++ {
			fork += pglogrepl.LSN(1 + rng.IntN(1000))
			p, _ := NewPositions(es)
			highest = max(highest, p.Pos(fork)+int64(rng.IntN(2000))-1000)
			next, err := Next(es, tl, fork, highest)
			if err != nil {
				t.Fatal(err)
			}
			if q, _ := NewPositions(next); q.Pos(fork) <= highest {
				t.Fatalf("epochs %+v: fork %s at position %d, not above %d", next, fork, q.Pos(fork), highest)
			}
			es = next
		}
		p, err := NewPositions(es)
		if err != nil {
			t.Fatal(err)
		}
		for l := pglogrepl.LSN(0); l < fork+100; l++ {
			if p.Pos(l+1) <= p.Pos(l) {
				t.Fatalf("epochs %+v: Pos not increasing at %s", es, l)
			}
			if got := p.Through(p.Pos(l)); got != int64(l) {
				t.Fatalf("epochs %+v: Through(Pos(%s)) = %d", es, l, got)
			}
			if p.Through(p.Pos(l)-1) != int64(l)-1 {
				t.Fatalf("epochs %+v: Through(Pos(%s)-1) = %d", es, l, p.Through(p.Pos(l)-1))
			}
		}
	}
}

func TestPositionsRefuseDisorder(t *testing.T) {
	if _, err := NewPositions([]Epoch{{Start: "0/20", Offset: 5}, {Start: "0/10", Offset: 9}}); err == nil {
		t.Fatal("epochs out of order were accepted")
	}
	if _, err := NewPositions([]Epoch{{Start: "0/10", Offset: 5}, {Start: "0/20", Offset: 1}}); err == nil {
		t.Fatal("a decreasing offset was accepted")
	}
	if _, err := Next([]Epoch{{Timeline: 2, Start: "0/20", Offset: 5}}, 3, 0x10, 0x100); err == nil {
		t.Fatal("a fork before the last epoch was accepted")
	}
}
