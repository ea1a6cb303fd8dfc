package topicmeta

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

func newTopic(t *testing.T, store storage.Store, name string) *delta.Table {
	t.Helper()
	ctx := context.Background()
	md, proto := topic.NewTableMetadata(name)
	if err := delta.CreateTable(ctx, storage.Sub(store, name), md, proto, nil); err != nil {
		t.Fatal(err)
	}
	if err := catalog.RegisterTopic(ctx, store, name); err != nil {
		t.Fatal(err)
	}
	tbl, err := delta.OpenTable(ctx, storage.Sub(store, name), delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

func appendTxn(t *testing.T, tbl *delta.Table, app string, v int64) {
	t.Helper()
	if _, err := tbl.Commit(context.Background(), delta.CommitActions{Txn: &delta.Txn{AppID: app, Version: v}}); err != nil {
		t.Fatalf("append %d: %v", v, err)
	}
}

type fakeContracts struct{}

func (fakeContracts) Describe(_ context.Context, _ storage.Store, in *Info) error {
	if in.Topic == "orders" {
		in.Contracts = []Contract{{Type: "OrderCreated", Versions: []int{1, 2}, Compatibility: "BACKWARD"}}
		in.PersonalColumns = []PersonalColumn{{Type: "OrderCreated", Version: 2, Column: "payload", Pointer: "/email"}}
	}
	return nil
}

// TestDescribeApplyUnderALiveWriter: a topic's Info joins its metadata,
// table and sources; Apply writes the description and comments into the
// table once, and a writer that was appending all along goes on.
func TestDescribeApplyUnderALiveWriter(t *testing.T) {
	ctx := context.Background()
	store, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	relay := newTopic(t, store, "orders")
	appendTxn(t, relay, "deltabus-main", 100)
	if err := catalog.WriteMarker(ctx, store, catalog.Marker{AppID: "deltabus-main", Slot: "main", Database: "shop", SystemID: "7"}); err != nil {
		t.Fatal(err)
	}
	in, err := LoadTopic(ctx, store, "orders")
	if err != nil || in.Version != 1 || len(in.Sources) != 1 || in.Sources[0].Database != "shop" || in.Sources[0].TxnLSN != "0/64" ||
		in.Contracts != nil || in.Owner != "" || len(in.Columns) != 13 || in.LogRetention != "interval 30 days" {
		t.Fatalf("undescribed topic: %+v %v", in, err)
	}
	if got := ContractsText(in.Contracts) + " " + PersonalText(in.PersonalColumns); got != "none none" {
		t.Fatalf("contracts and personal columns before any provider: %q", got)
	}
	if err := catalog.WriteTopicMeta(ctx, store, catalog.TopicMeta{Topic: "orders", Owner: "team-checkout", Description: "Orders, authoritative."}); err != nil {
		t.Fatal(err)
	}
	if in, err = LoadTopic(ctx, store, "orders"); err != nil || in.Owner != "team-checkout" {
		t.Fatalf("described: %+v %v", in, err)
	}
	if p := Pending([]Info{in}); len(p) != 1 {
		t.Fatalf("pending before Apply: %v", p)
	}
	v, changed, err := Apply(ctx, store, in)
	if err != nil || !changed || v != 2 {
		t.Fatalf("Apply: v=%d changed=%t %v", v, changed, err)
	}
	appendTxn(t, relay, "deltabus-main", 200) // the live writer follows the comment change
	snap, err := delta.LoadSnapshot(ctx, storage.Sub(store, "orders"), -1)
	if err != nil || snap.Version != 3 || snap.Metadata.Description == nil || *snap.Metadata.Description != "Orders, authoritative." {
		t.Fatalf("after Apply and an append: %+v %v", snap, err)
	}
	if !delta.SameSchema(snap.Metadata.SchemaString, topic.SchemaString(false)) || !strings.Contains(snap.Metadata.SchemaString, `"comment":"Event payload, JSON text."`) {
		t.Fatalf("schema after Apply: %s", snap.Metadata.SchemaString)
	}
	in, _ = LoadTopic(ctx, store, "orders")
	if _, changed, err := Apply(ctx, store, in); changed || err != nil || len(Pending([]Info{in})) != 0 {
		t.Fatalf("second Apply: changed=%t %v", changed, err)
	}

	Register(fakeContracts{})
	t.Cleanup(func() { providersMu.Lock(); providers = nil; providersMu.Unlock() })
	in, _ = LoadTopic(ctx, store, "orders")
	if ContractsText(in.Contracts) != "OrderCreated v1,v2 (BACKWARD)" || PersonalText(in.PersonalColumns) != "payload/email (OrderCreated v2)" {
		t.Fatalf("provider's contracts: %+v %+v", in.Contracts, in.PersonalColumns)
	}
	if _, changed, err := Apply(ctx, store, in); !changed || err != nil {
		t.Fatalf("Apply with contracts: changed=%t %v", changed, err)
	}
	appendTxn(t, relay, "deltabus-main", 300)
	in, _ = LoadTopic(ctx, store, "orders")
	for _, c := range in.Columns {
		if c.Name == "payload" && !strings.Contains(c.Comment, "Contracts: OrderCreated v1,v2 (BACKWARD). Personal fields: payload/email") {
			t.Errorf("payload comment %q", c.Comment)
		}
	}
	if _, _, err := Apply(ctx, store, Info{Topic: "tenants"}); !errors.Is(err, ErrNoTable) {
		t.Fatalf("Apply without a table: %v", err)
	}
	all, err := Load(ctx, store)
	if err != nil || len(all) != 1 || all[0].Topic != "orders" {
		t.Fatalf("Load: %+v %v", all, err)
	}
}
