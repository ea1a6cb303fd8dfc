package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
	"github.com/deltabus/deltabus/tests/otlptest"
	"github.com/deltabus/deltabus/verify"
)

// producerSpan returns a context carrying a fresh sampled span, as an
// instrumented service's request handler has.
func producerSpan(t *testing.T) (context.Context, trace.SpanContext) {
	t.Helper()
	var tid trace.TraceID
	var sid trace.SpanID
	_, _ = rand.Read(tid[:])
	_, _ = rand.Read(sid[:])
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	return trace.ContextWithSpanContext(context.Background(), sc), sc
}

// TestTracesReachOTLP: a relay process pointed at an OTLP/HTTP receiver
// by the standard variables exports a span per batch and per topic commit;
// the commit span of the producer's topic links the producer's span, whose
// trace context outbox.Write put in the event's headers. The batch span
// processor and the metric reader wait 60 s, so what arrives was flushed
// by SIGTERM. The headers reach the topic table unchanged, and a
// consumer's handler span links the producer's span too.
func TestTracesReachOTLP(t *testing.T) {
	db := setup(t)
	url, store := localStore(t)
	rcv := otlptest.Start(t)
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + url,
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL, "OTEL_SERVICE_NAME=relay-under-test",
		"OTEL_RESOURCE_ATTRIBUTES=deployment.environment=e2e", "OTEL_TRACES_SAMPLER=parentbased_always_on",
		"OTEL_BSP_SCHEDULE_DELAY=60000", "OTEL_METRIC_EXPORT_INTERVAL=60000"}
	p := startRelay(t, env, "--batch-max-delay", "20ms")
	waitSlotActive(t, db.DSN, "deltabus", p)

	ctx, producer := producerSpan(t)
	conn := db.Conn(t)
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		return outbox.Write(ctx, tx,
			outbox.NewEvent{Topic: "orders", Key: "o1", Type: "Placed", Payload: map[string]int{"n": 1}, Headers: map[string]string{"tenant": "t1"}},
			outbox.NewEvent{Topic: "orders", Key: "o2", Type: "Placed", Payload: map[string]int{"n": 2}})
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) SELECT 'payments', 'p' || i, 'Paid', '{}' FROM generate_series(1, 20) i`)
	waitDrained(t, db.DSN, "deltabus", time.Minute)
	var stored string
	if err := conn.QueryRow(ctx, `SELECT headers::text FROM outbox WHERE key = 'o1'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if err := p.stop(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, p.tail())
	}

	spans := rcv.Spans()
	var commit *otlptest.Span
	batches := map[string]bool{}
	for i, s := range spans {
		switch s.GetName() {
		case "deltabus.batch":
			batches[string(s.GetSpanId())] = true
		case "deltabus.topic.commit":
			if otlptest.Attr(s.GetAttributes(), "deltabus.topic") == "orders" {
				commit = &spans[i]
			}
		}
	}
	if commit == nil {
		t.Fatalf("no orders topic-commit span among %d spans received after SIGTERM\n%s", len(spans), p.tail())
	}
	if !batches[string(commit.GetParentSpanId())] {
		t.Errorf("the orders commit span's parent is not a batch span")
	}
	links := commit.GetLinks()
	tid, sid := producer.TraceID(), producer.SpanID()
	if len(links) != 1 || !bytes.Equal(links[0].GetTraceId(), tid[:]) || !bytes.Equal(links[0].GetSpanId(), sid[:]) {
		t.Errorf("orders commit links %v, want the producer span %s/%s", links, producer.TraceID(), producer.SpanID())
	}
	if v := otlptest.Attr(commit.GetAttributes(), "deltabus.events"); v != "2" {
		t.Errorf("orders commit: deltabus.events = %q, want 2", v)
	}
	if otlptest.Attr(commit.GetAttributes(), "deltabus.delta.version") == "" || otlptest.Attr(commit.GetAttributes(), "deltabus.commit_lsn") == "" {
		t.Errorf("orders commit lacks its Delta version or commit LSN: %v", commit.GetAttributes())
	}
	res := commit.Resource.GetAttributes()
	if otlptest.Attr(res, "service.name") != "relay-under-test" || otlptest.Attr(res, "deployment.environment") != "e2e" {
		t.Errorf("resource %v, want service.name and deployment.environment from the environment", res)
	}
	names := rcv.MetricNames()
	for _, m := range []string{"deltabus_events_committed_total", "deltabus_durable_lsn", "go_goroutines", "process_cpu_seconds_total"} {
		if !names[m] {
			t.Errorf("metric %s not pushed by OTLP at shutdown (got %d metrics)", m, len(names))
		}
	}

	// The event reaches its table with the headers the outbox stored, and a
	// consumer links the producer's span.
	rec := tracetest.NewSpanRecorder()
	var got []string
	h := func(_ context.Context, b *subscribe.Batch) error {
		for _, ev := range b.Events {
			if ev.Headers != nil {
				got = append(got, *ev.Headers)
			}
		}
		return nil
	}
	opts := subscribe.Options{Tracer: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))}
	if err := subscribe.Subscribe(context.Background(), store, "orders", "tracing", h, opts); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != stored {
		t.Errorf("orders headers in the table %q, the outbox holds %q", got, stored)
	}
	var fields map[string]string
	if err := json.Unmarshal([]byte(stored), &fields); err != nil || fields["tenant"] != "t1" || !strings.Contains(fields["traceparent"], producer.TraceID().String()) {
		t.Errorf("stored headers %s: want the caller's field and the producer's traceparent", stored)
	}
	consumed := rec.Ended()
	if len(consumed) != 1 || len(consumed[0].Links()) != 1 || consumed[0].Links()[0].SpanContext.TraceID() != producer.TraceID() {
		t.Errorf("consumer spans %v: want one handler span linked to the producer's trace", consumed)
	}
}

// TestUnreachableCollectorDoesNotHoldTheRelay: with the OTLP endpoint
// pointing at a port nobody listens on, the relay streams as usual, logs
// the failed exports without echoing OTEL_EXPORTER_OTLP_HEADERS, and a
// SIGTERM still ends it within --shutdown-timeout plus the 2 s the last
// flush may take.
func TestUnreachableCollectorDoesNotHoldTheRelay(t *testing.T) {
	db := setup(t)
	url, store := localStore(t)
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + url, "OTEL_EXPORTER_OTLP_ENDPOINT=http://" + freeAddr(t),
		"OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20s3cr3t-token", "OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_METRIC_EXPORT_INTERVAL=200"}
	p := startRelay(t, env, "--batch-max-delay", "20ms", "--shutdown-timeout", "2s")
	waitSlotActive(t, db.DSN, "deltabus", p)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) SELECT 'orders', 'o' || i, 'Placed', '{}' FROM generate_series(1, 50) i`)
	waitDrained(t, db.DSN, "deltabus", time.Minute)
	if n := topicCount(t, store, "orders"); n != 50 {
		t.Fatalf("orders holds %d events, want 50", n)
	}
	time.Sleep(time.Second) // exports fail meanwhile
	began := time.Now()
	if err := p.stop(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, p.tail())
	}
	took := time.Since(began)
	t.Logf("exited %s after SIGTERM", took.Round(time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("the relay took %s to exit after SIGTERM with an unreachable collector (shutdown timeout 2s)", took)
	}
	out := p.output()
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "telemetry") {
			t.Log(l)
		}
	}
	if !strings.Contains(out, "telemetry: export failed") {
		t.Errorf("no log line about the failed exports:\n%s", p.tail())
	}
	if strings.Contains(out, "s3cr3t-token") {
		t.Error("the relay's log echoes OTEL_EXPORTER_OTLP_HEADERS")
	}
}

func topicCount(t *testing.T, store storage.Store, topic string) int {
	t.Helper()
	rows, err := verify.ReadTopic(context.Background(), store, topic)
	if err != nil {
		t.Fatal(err)
	}
	return len(rows)
}
