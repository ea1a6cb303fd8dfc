package catalog

import (
	"context"
	"strings"
	"testing"

	"github.com/deltabus/deltabus/storage"
)

// TestClaimLost: a table holds a source's claimed progress when it holds
// the claimed position or a later one, in any table; below it, the table
// was replaced (another id) or went back (the same id).
func TestClaimLost(t *testing.T) {
	c := Claim{Table: "orders", AppID: "a"}
	if !c.Note("orders", "t1", 500, 7) {
		t.Fatal("a first position was not noted")
	}
	for _, x := range []struct {
		id   string
		txn  int64
		want string
	}{
		{"t1", 500, ""},
		{"t1", 900, ""},
		{"t2", 900, ""}, // a rebuild into a new table, past the claim
		{"t1", 400, "older state"},
		{"t1", -1, "older state"},
		{"t2", -1, "replaced"},
		{"t2", 400, "replaced"},
	} {
		got := c.Lost("orders", x.id, x.txn)
		if (x.want == "") != (got == "") || !strings.Contains(got, x.want) {
			t.Errorf("Lost(orders, %s, %d) = %q, want %q", x.id, x.txn, got, x.want)
		}
	}
	if c.Lost("payments", "t1", -1) != "" {
		t.Error("a topic without a claim was lost")
	}
	if c.Note("orders", "t2", 400, 1) || c.Note("orders", "t1", 300, 9) {
		t.Error("a lost table's position replaced the claim")
	}
	if !c.Note("orders", "t2", 900, 2) || !c.Binds("orders", "t2") || c.Topics["orders"].Txn != 900 {
		t.Errorf("a new table past the claim did not take it over: %+v", c.Topics["orders"])
	}
}

func TestClaimRoundTrip(t *testing.T) {
	ctx := context.Background()
	store, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if c, ok, err := ReadClaim(ctx, store, "deltabus-1-s", "_group.m"); ok || err != nil || c.Topics == nil {
		t.Fatalf("no claim: %+v %v %v", c, ok, err)
	}
	c := Claim{Table: "_group.m", AppID: "deltabus-1-s"}
	c.Note("m.a", "id1", 10, 3)
	if err := WriteClaim(ctx, store, c); err != nil {
		t.Fatal(err)
	}
	got, ok, err := ReadClaim(ctx, store, "deltabus-1-s", "_group.m")
	if !ok || err != nil || got.Topics["m.a"] != (Progress{TableID: "id1", Txn: 10, Version: 3}) {
		t.Fatalf("read back %+v %v %v", got, ok, err)
	}
}
