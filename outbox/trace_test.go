package outbox_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"

	"github.com/deltabus/deltabus/outbox"
)

// producerContext is a request's context as an instrumented service has
// it: a sampled span with trace state, and baggage.
func producerContext(t *testing.T) (context.Context, trace.SpanContext) {
	t.Helper()
	ts, err := trace.ParseTraceState("vendor=abc")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true,
	})
	m, err := baggage.NewMember("tenant", "t-42")
	if err != nil {
		t.Fatal(err)
	}
	b, err := baggage.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return baggage.ContextWithBaggage(trace.ContextWithSpanContext(context.Background(), sc), b), sc
}

// TestWriteRecordsTraceContext: Write records the caller's traceparent,
// tracestate and baggage in the headers of every event, never replaces a
// field the caller set, leaves headers that are not an object alone, and
// TraceContext reads the producer's span back from what PostgreSQL stored.
func TestWriteRecordsTraceContext(t *testing.T) {
	_, conn, _ := outboxDB(t)
	ctx, sc := producerContext(t)
	mine := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	events := []outbox.NewEvent{
		{Topic: "a", Key: "none", Type: "T", Payload: json.RawMessage(`{}`)},
		{Topic: "a", Key: "own", Type: "T", Payload: json.RawMessage(`{}`), Headers: map[string]string{"traceparent": mine, "x": "y"}},
		{Topic: "a", Key: "array", Type: "T", Payload: json.RawMessage(`{}`), Headers: json.RawMessage(`[1, 2]`)},
		{Topic: "a", Key: "empty", Type: "T", Payload: json.RawMessage(`{}`), Headers: json.RawMessage(` { } `)},
		{Topic: "a", Key: "nested", Type: "T", Payload: json.RawMessage(`{}`), Headers: json.RawMessage(`{"a": {"traceparent": 1}}`)},
	}
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return outbox.Write(ctx, tx, events...) }); err != nil {
		t.Fatal(err)
	}
	// Without a span or baggage in ctx nothing is added.
	plain := outbox.NewEvent{Topic: "a", Key: "plain", Type: "T", Payload: json.RawMessage(`{}`)}
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return outbox.Write(context.Background(), tx, plain) }); err != nil {
		t.Fatal(err)
	}
	got := map[string]*string{}
	rows, _ := conn.Query(ctx, `SELECT key, headers::text FROM outbox`)
	for rows.Next() {
		var k string
		var h *string
		if err := rows.Scan(&k, &h); err != nil {
			t.Fatal(err)
		}
		got[k] = h
	}
	if rows.Err() != nil || len(got) != 6 {
		t.Fatalf("read %d rows: %v", len(got), rows.Err())
	}
	for _, k := range []string{"none", "empty", "nested"} {
		h := got[k]
		if h == nil {
			t.Fatalf("%s: no headers", k)
		}
		if p := outbox.ProducerSpan(*h); p.TraceID() != sc.TraceID() || p.SpanID() != sc.SpanID() || p.TraceState().Get("vendor") != "abc" {
			t.Errorf("%s: headers %s carry span %v, want %v", k, *h, p, sc)
		}
		if b := baggage.FromContext(outbox.TraceContext(context.Background(), *h)); b.Member("tenant").Value() != "t-42" {
			t.Errorf("%s: headers %s carry baggage %q", k, *h, b)
		}
	}
	var nested map[string]json.RawMessage
	if err := json.Unmarshal([]byte(*got["nested"]), &nested); err != nil || string(nested["a"]) != `{"traceparent": 1}` {
		t.Errorf("nested: the caller's fields changed: %s", *got["nested"])
	}
	var own map[string]string
	if err := json.Unmarshal([]byte(*got["own"]), &own); err != nil || own["traceparent"] != mine || own["x"] != "y" || own["baggage"] != "tenant=t-42" {
		t.Errorf("own: %s; want the caller's traceparent kept, baggage added", *got["own"])
	}
	if h := got["array"]; h == nil || *h != "[1, 2]" {
		t.Errorf("array headers changed to %v", h)
	}
	if got["plain"] != nil {
		t.Errorf("headers %s written without a trace context", *got["plain"])
	}
}
