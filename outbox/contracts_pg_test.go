package outbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/deltabus/deltabus/contract"
	"github.com/deltabus/deltabus/contract/compat"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/storage"
)

// TestWriteRefusesAnEventThatBreaksItsContract: with Contracts set, Write
// validates every event before the INSERT; one invalid event fails the
// whole call with the contract's violation (topic, type, version, first
// failing pointer), nothing reaches the table, and the producer's
// transaction rolls back with its own change. Valid events of every
// registered version are written.
func TestWriteRefusesAnEventThatBreaksItsContract(t *testing.T) {
	_, conn, _ := outboxDB(t)
	ctx := context.Background()
	store, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg := contract.NewRegistry(store, nil)
	for v, s := range []string{
		`{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"integer"}}}`,
		`{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"integer"},"note":{"type":"string"}}}`,
	} {
		if _, err := reg.Register(ctx, contract.Registration{Topic: "orders", Type: "OrderPlaced", Version: int32(v + 1), Schema: []byte(s), Mode: compat.None}); err != nil {
			t.Fatal(err)
		}
	}
	w := outbox.Writer{Contracts: contract.New(store, contract.Options{})}
	if _, err := conn.Exec(ctx, `CREATE TABLE orders (id int primary key)`); err != nil {
		t.Fatal(err)
	}

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO orders VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	err = w.Write(ctx, tx,
		outbox.NewEvent{Topic: "orders", Key: "1", Type: "OrderPlaced", Payload: map[string]any{"order_id": 1}},
		outbox.NewEvent{Topic: "orders", Key: "1", Type: "OrderPlaced", SchemaVersion: 2, Payload: map[string]any{"order_id": 1, "note": 5}})
	var v *contract.Violation
	if !errors.As(err, &v) || v.Topic != "orders" || v.Type != "OrderPlaced" || v.Version != 2 || v.Pointer != "/note" {
		t.Fatalf("Write of an invalid event: %v", err)
	}
	_ = tx.Rollback(ctx)
	var events, orders int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM outbox), (SELECT count(*) FROM orders)`).Scan(&events, &orders); err != nil || events != 0 || orders != 0 {
		t.Fatalf("after the refused write: %d events, %d orders (%v)", events, orders, err)
	}

	err = w.Write(ctx, nil, outbox.NewEvent{Topic: "orders", Type: "OrderPlaced", SchemaVersion: 3, Payload: map[string]any{"order_id": 1}})
	if !errors.As(err, &v) || v.Problem != contract.Unregistered {
		t.Fatalf("Write of an unregistered version: %v", err)
	}

	tx, err = conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, tx,
		outbox.NewEvent{Topic: "orders", Type: "OrderPlaced", Payload: map[string]any{"order_id": 1}},
		outbox.NewEvent{Topic: "orders", Type: "OrderPlaced", SchemaVersion: 2, Payload: map[string]any{"order_id": 2, "note": "gift"}},
		outbox.NewEvent{Topic: "payments", Type: "Uncontracted", Payload: []byte(`"anything"`)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&events); err != nil || events != 3 {
		t.Fatalf("valid events written: %d (%v)", events, err)
	}
}
