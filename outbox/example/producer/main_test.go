package main

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/deltabus/deltabus/tests/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func TestPlaceOrderWritesOrderAndEventTogether(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx, conn := context.Background(), db.Conn(t)
	if err := run(ctx, db.DSN, "c-1", 999); err != nil { // main's own path, setup included
		t.Fatal(err)
	}
	orderID, eventID, err := placeOrder(ctx, conn, "c-42", 1250)
	if err != nil {
		t.Fatal(err)
	}
	var key, typ, payload, headers string
	err = conn.QueryRow(ctx, `SELECT key, type, payload::text, headers::text FROM outbox WHERE id = $1`, eventID).
		Scan(&key, &typ, &payload, &headers)
	if err != nil {
		t.Fatal(err)
	}
	wantPayload := `{"customer": "c-42", "order_id": ` + strconv.FormatInt(orderID, 10) + `, "total_cents": 1250}`
	if key != strconv.FormatInt(orderID, 10) || typ != "OrderPlaced" || payload != wantPayload || headers != `{"source": "example-producer"}` {
		t.Errorf("event row: %s %s %s %s", key, typ, payload, headers)
	}

	// A failing business insert takes its event with it.
	if _, _, err := placeOrder(ctx, conn, "c-7", -5); err == nil {
		t.Fatal("order with a negative total accepted")
	}
	var orders, events int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM outbox)`).Scan(&orders, &events); err != nil {
		t.Fatal(err)
	}
	if orders != 2 || events != 2 {
		t.Errorf("%d orders and %d events, want 2 and 2", orders, events)
	}
}
