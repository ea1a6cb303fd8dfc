package relay

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink"
	"github.com/deltabus/deltabus/telemetry/otelspan"
)

// Traces. Every batch is a root span, "deltabus.batch", from its first
// event to the end of its commit (attributes: events, bytes, transactions,
// topics, commit and end LSN). Each topic commit is its child,
// "deltabus.topic.commit" (topic, events, bytes, files, Delta version,
// commit LSN), linked to the producer spans whose trace context its events
// carry in their headers (outbox.TraceContext): at most MaxProducerLinks
// per commit, the events beyond counted in deltabus.producer_links.dropped.
// Headers are read only for a batch whose span records (tracing on and the
// batch sampled), and never changed.

// MaxProducerLinks bounds the producer links of one topic-commit span.
const MaxProducerLinks = 128

// tracerOf returns the relay's tracer from tp (nil: a no-op one).
func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer("github.com/deltabus/deltabus/relay")
}

// batchTrace is a batch's span and, while it records, the producer spans
// its events carry, by topic.
type batchTrace struct {
	tracer trace.Tracer
	span   trace.Span                // nil until the first event or the commit
	links  map[string]*producerLinks // nil unless span records
	ended  bool
}

type producerLinks struct {
	links   []trace.Link
	dropped int
}

// begin starts the batch's span at the time the batch opened.
func (t *batchTrace) begin(at time.Time) {
	if t.span != nil {
		return
	}
	if at.IsZero() {
		at = time.Now()
	}
	_, t.span = t.tracer.Start(context.Background(), "deltabus.batch", trace.WithTimestamp(at))
	if t.span.IsRecording() {
		t.links = map[string]*producerLinks{}
	}
}

// event notes ev's producer span under table (the commit that will hold
// it), if the batch is traced and ev has one.
func (t *batchTrace) event(ev *outbox.Event, table string, openedAt time.Time) {
	if t.span == nil {
		t.begin(openedAt)
	}
	if t.links == nil || ev.Headers == nil || !outbox.HasTraceContext(*ev.Headers) {
		return
	}
	l := t.links[table]
	if l == nil {
		l = &producerLinks{}
		t.links[table] = l
	}
	if len(l.links) >= MaxProducerLinks {
		l.dropped++
		return
	}
	sc := outbox.ProducerSpan(strings.Clone(*ev.Headers)) // a trace state keeps pieces of it
	if !sc.IsValid() {
		return
	}
	if n := len(l.links); n > 0 && l.links[n-1].SpanContext.Equal(sc) {
		return // events of one producer call
	}
	l.links = append(l.links, trace.Link{SpanContext: sc})
}

// carry moves table's producer links to next, the batch its rows were
// carried into (pacer.split), so their commit span still links them.
func (t *batchTrace) carry(table string, next *batchTrace, since time.Time) {
	l := t.links[table]
	if l == nil {
		return
	}
	delete(t.links, table)
	next.begin(since)
	if next.links != nil {
		next.links[table] = l
	}
}

// commitContext returns ctx holding the batch's span, starting it if no
// event did.
func (t *batchTrace) commitContext(ctx context.Context, b *batch) context.Context {
	t.begin(b.openedAt)
	return trace.ContextWithSpan(ctx, t.span)
}

// end ends the batch's span with its figures and outcome.
func (t *batchTrace) end(b *batch, err error) {
	if t.span == nil || t.ended {
		return
	}
	t.ended = true
	if t.span.IsRecording() {
		t.span.SetAttributes(attribute.Int64("deltabus.batch.seq", b.seq), attribute.Int("deltabus.events", b.events),
			attribute.Int64("deltabus.bytes", b.bytes), attribute.Int("deltabus.transactions", b.txs),
			attribute.Int("deltabus.topics", len(b.order)), attribute.String("deltabus.commit_lsn", b.lastLSN.String()),
			attribute.String("deltabus.end_lsn", b.endLSN.String()))
		otelspan.Fail(t.span, err)
	}
	t.span.End()
	t.links = nil
}

// abort ends the span of a batch discarded before its commit ended.
func (t *batchTrace) abort(b *batch) {
	if t.span != nil && !t.ended && t.span.IsRecording() {
		t.span.SetStatus(codes.Error, "batch discarded: the session ended; read again from the slot")
	}
	t.end(b, nil)
}

// startTopicCommit starts the span of topic's commit of b, linked to the
// producer spans its events carry.
func (c *committer) startTopicCommit(ctx context.Context, b *batch, topic string) (context.Context, trace.Span) {
	var opts []trace.SpanStartOption
	if l := b.trace.links[topic]; l != nil {
		opts = append(opts, trace.WithLinks(l.links...))
		if l.dropped > 0 {
			opts = append(opts, trace.WithAttributes(attribute.Int("deltabus.producer_links.dropped", l.dropped)))
		}
	}
	return c.r.tracer.Start(ctx, "deltabus.topic.commit", opts...)
}

// endTopicCommit ends a topic commit's span with what the commit wrote.
func endTopicCommit(span trace.Span, topic string, lsn pglogrepl.LSN, res sink.Commit, err error) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String("deltabus.topic", topic), attribute.String("messaging.destination.name", topic),
			attribute.String("deltabus.commit_lsn", lsn.String()), attribute.Int("deltabus.events", res.Events),
			attribute.Int64("deltabus.bytes", res.Bytes), attribute.Int("deltabus.files", res.Files))
		if err != nil {
			otelspan.Fail(span, err)
		} else {
			span.SetAttributes(attribute.Int64("deltabus.delta.version", res.Version))
		}
	}
	span.End()
}
