package subscribe

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// TestHandlerSpanLinksProducers: the handler's span is linked to the
// producer spans the events' headers carry, and a handler continues a
// producer's trace from Event.TraceContext.
func TestHandlerSpanLinksProducers(t *testing.T) {
	root := localRoot(t)
	tt := newTestTopic(t, root, "orders")
	var want []trace.SpanContext
	w := topic.NewFileWriter(storage.Sub(root, "orders"), topic.FileOptions{})
	now := time.Now().UTC().Truncate(time.Microsecond)
	for i := range 4 {
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, byte(i + 1)}, SpanID: trace.SpanID{2, byte(i + 1)},
			TraceFlags: trace.FlagsSampled, Remote: true})
		want = append(want, sc)
		h := fmt.Sprintf(`{"traceparent": "00-%s-%s-01", "other": true}`, sc.TraceID(), sc.SpanID())
		ev := &outbox.Event{ID: fmt.Sprintf("00000000-0000-0000-0000-%012d", i+1), Topic: "orders", Key: "k", Type: "T",
			SchemaVersion: 1, Payload: `{}`, Headers: &h, OccurredAt: now, CommitLSN: 2000, Seq: int32(i), Xid: 7, CommitTime: now}
		if err := w.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	adds, err := w.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tt.tbl.Commit(context.Background(), delta.CommitActions{Adds: adds, Txn: &delta.Txn{AppID: "test", Version: 2000}}); err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	var parents []trace.SpanContext
	h := func(ctx context.Context, b *Batch) error {
		for i := range b.Events {
			parents = append(parents, trace.SpanContextFromContext(b.Events[i].TraceContext(ctx)))
		}
		return nil
	}
	if err := Subscribe(context.Background(), root, "orders", "g", h, Options{Tracer: tp}); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	if len(spans) != 1 || spans[0].Name() != "deltabus.subscribe.handle" {
		t.Fatalf("%d spans, want one handler span", len(spans))
	}
	links := spans[0].Links()
	if len(links) != len(want) {
		t.Fatalf("%d links, want %d", len(links), len(want))
	}
	for i, l := range links {
		if !l.SpanContext.Equal(want[i]) {
			t.Errorf("link %d: %v, want %v", i, l.SpanContext, want[i])
		}
	}
	if len(parents) != len(want) || !parents[2].Equal(want[2]) || !parents[2].IsRemote() {
		t.Errorf("Event.TraceContext gave %v, want the producers' span contexts %v", parents, want)
	}
	// A batch by column (Options.Columns) gets the same links.
	rec = tracetest.NewSpanRecorder()
	opts := Options{Tracer: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), Columns: true}
	if err := Subscribe(context.Background(), root, "orders", "columns", func(context.Context, *Batch) error { return nil }, opts); err != nil {
		t.Fatal(err)
	}
	if spans := rec.Ended(); len(spans) != 1 || !reflect.DeepEqual(spans[0].Links(), links) {
		t.Fatalf("by column: %d spans, links %v, want %v", len(spans), spans[0].Links(), links)
	}
}
