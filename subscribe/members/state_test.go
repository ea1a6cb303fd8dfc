package members

import (
	"context"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
)

// TestAckedRanges: acknowledging positions in any order keeps sorted,
// disjoint, merged ranges that answer isAcked exactly.
func TestAckedRanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		s := newState()
		want := map[int64]bool{}
		for range rng.IntN(60) {
			o := rng.Int64N(40)
			s.markAcked(Position{Version: 3, Offset: o})
			want[o] = true
		}
		for o := range int64(41) {
			if got := s.isAcked(Position{Version: 3, Offset: o}); got != want[o] {
				t.Fatalf("round %d: isAcked(%d) = %t, want %t; ranges %v", round, o, got, want[o], s.acked[3])
			}
		}
		rs := s.acked[3]
		for i := 1; i < len(rs); i++ {
			if rs[i-1][1] >= rs[i][0] {
				t.Fatalf("round %d: ranges not disjoint and merged: %v", round, rs)
			}
		}
		low := rng.Int64N(41)
		s.setLow(Position{Version: 3, Offset: low})
		for o := range int64(41) {
			if got := s.isAcked(Position{Version: 3, Offset: o}); got != (o < low || want[o]) {
				t.Fatalf("round %d: after Low %d isAcked(%d) = %t", round, low, o, got)
			}
		}
	}
}

// TestSnapshotRoundTrip: a state written as a snapshot reads back equal.
func TestSnapshotRoundTrip(t *testing.T) {
	s := newState()
	now := time.UnixMilli(time.Now().UnixMilli()).UTC()
	s.apply(1, &entry{At: ms(now), Reset: &resetOp{Epoch: 1, Low: Position{Version: 2}, TableID: "t"}})
	s.apply(2, &entry{At: ms(now), Lease: []leaseOp{{posOp: posOp{2, 0}, D: 1, M: "m1", Until: ms(now.Add(time.Minute))},
		{posOp: posOp{2, 1}, D: 1, M: "m2", Until: ms(now.Add(time.Minute))}}})
	s.apply(3, &entry{At: ms(now), Ack: []posOp{{2, 1}}, Nack: []nackOp{{posOp: posOp{2, 0}, NotBefore: ms(now.Add(time.Second))}}})
	data, err := s.marshal("g", "orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	back, err := unmarshalState(data, "g", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, back) {
		t.Fatalf("snapshot round trip:\n%+v\n%+v", s, back)
	}
	if _, err := unmarshalState(data, "g", "payments"); err == nil {
		t.Fatal("a snapshot of another topic was read")
	}
}

// TestCleanUpKeepsTheStateReadable: once snapshots exist, clean-up
// deletes old entries and snapshots, and the state loaded from what is
// left equals the state of every entry applied in turn.
func TestCleanUpKeepsTheStateReadable(t *testing.T) {
	old := logRetain
	logRetain = 0
	defer func() { logRetain = old }()
	ctx := context.Background()
	root, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lg, err := newGroupLog(root, "g", "orders")
	if err != nil {
		t.Fatal(err)
	}
	want := newState()
	for seq := int64(1); seq <= 30; seq++ {
		e := &entry{Server: "s", At: time.Now().UnixMilli(), Ack: []posOp{{1, seq}}}
		if seq == 1 {
			e = &entry{Server: "s", At: time.Now().UnixMilli(), Reset: &resetOp{Epoch: 1, Low: Position{Version: 1}}}
		}
		data, _ := marshalEntry(e)
		if err := lg.put(ctx, seq, data); err != nil {
			t.Fatal(err)
		}
		if err := lg.put(ctx, seq, append(data, ' ')); err == nil {
			t.Fatalf("entry %d was written twice with different bytes", seq)
		}
		want.apply(seq, e)
		if seq%10 == 0 {
			time.Sleep(10 * time.Millisecond) // distinct modification times
			snap, _ := want.marshal("g", "orders", nil)
			if err := lg.writeSnapshot(ctx, seq, snap); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(20 * time.Millisecond)
	if err := lg.put(ctx, 31, []byte(`{"server":"s","at":1}`)); err != nil {
		t.Fatal(err)
	}
	want.apply(31, &entry{Server: "s", At: 1})
	n, err := lg.clean(ctx)
	if err != nil || n == 0 {
		t.Fatalf("clean-up deleted %d objects: %v", n, err)
	}
	dir, _ := catalog.MemberDir("g", "orders")
	left, _ := root.List(ctx, dir+catalog.MemberLogDir, "")
	if len(left) > 2 {
		t.Fatalf("%d entries left after clean-up; want those after the newest snapshot", len(left))
	}
	got, _, err := lg.load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("state after clean-up:\n%+v\nwant\n%+v", got, want)
	}
}
