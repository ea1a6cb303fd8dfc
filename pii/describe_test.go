package pii

import (
	"context"
	"testing"

	"github.com/deltabus/deltabus/pii/classify"
	"github.com/deltabus/deltabus/topicmeta"
)

// TestColumnsListPersonalLeaves: the Provider lists each version's
// personal leaves (with "*" for array elements) and a pseudonymised key,
// for its own topic only, and nothing once the classifications are unset.
func TestColumnsListPersonalLeaves(t *testing.T) {
	c, err := classify.Parse([]byte(schemaV1))
	if err != nil {
		t.Fatal(err)
	}
	s := classify.NewStatic()
	s.Add("orders", "OrderCreated", 1, c)
	s.Add("orders", "OrderCreated", 2, c)
	s.Add("orders", "OrderShipped", 1, nil)
	s.Add("invoices", "InvoiceSent", 1, c)
	s.SetPseudonymizeKey("orders")
	var p Columns
	p.Set(s)
	in := topicmeta.Info{Topic: "orders"}
	if err := p.Describe(context.Background(), nil, &in); err != nil {
		t.Fatal(err)
	}
	want := "key (keyed hash), payload/customer/addresses/*/street (OrderCreated v1), payload/customer/email (OrderCreated v1), " +
		"payload/customer/addresses/*/street (OrderCreated v2), payload/customer/email (OrderCreated v2)"
	if got := topicmeta.PersonalText(in.PersonalColumns); got != want {
		t.Fatalf("orders:\n got %s\nwant %s", got, want)
	}
	other := topicmeta.Info{Topic: "shipments"}
	if err := p.Describe(context.Background(), nil, &other); err != nil || other.PersonalColumns != nil {
		t.Fatalf("a topic without contracts: %+v %v", other.PersonalColumns, err)
	}
	p.Set(nil)
	if err := p.Describe(context.Background(), nil, &in); err != nil || in.PersonalColumns != nil {
		t.Fatalf("after Set(nil): %+v %v", in.PersonalColumns, err)
	}
}
