package relay

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	pg "github.com/deltabus/deltabus/decoding/pgoutputtest"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/sinktest"
)

// traceparent returns producer span n's W3C traceparent.
func traceparent(n int) (string, trace.SpanContext) {
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], fmt.Sprintf("trace-%010d", n))
	copy(sid[:], fmt.Sprintf("s%07d", n))
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	return fmt.Sprintf("00-%s-%s-01", tid, sid), sc
}

// txHeaders commits one transaction with an event per (topic, headers).
func (s *source) txHeaders(events ...[2]string) (commit pglogrepl.LSN) {
	if !s.rel {
		s.send(pg.Relation(1, "public", "outbox", pg.OutboxColumns()))
		s.rel = true
	}
	s.xid++
	commit = s.lsn + pglogrepl.LSN(0x100*(len(events)+2))
	s.send(pg.Begin(commit, time.Now(), s.xid))
	for _, e := range events {
		s.n++
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", s.n)
		tuple := pg.OutboxTuple(id, e[0], `{"n":1}`)
		if e[1] != "" {
			tuple[6] = pg.Text(e[1])
		}
		s.send(pg.Insert(1, tuple...))
	}
	s.lsn = commit - 0x100
	s.send(pg.Commit(commit, commit+0x10, time.Now()))
	return commit
}

// TestTopicCommitLinksProducerSpans: a traced batch is a root span with
// one child per topic commit, each linked to the producer spans its
// events' headers carry (once per producer call, at most
// MaxProducerLinks, the rest counted).
func TestTopicCommitLinksProducerSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	h := newHarnessWith(t, sinktest.NewMemory(), 0x1000, nil, func(r *Relay) { r.Tracer = tp })
	p1, sc1 := traceparent(1)
	p2, sc2 := traceparent(2)
	h1 := fmt.Sprintf(`{"traceparent": "%s", "x": 1}`, p1)
	events := [][2]string{{"orders", h1}, {"orders", h1}, {"payments", fmt.Sprintf(`{"traceparent": "%s"}`, p2)},
		{"orders", ""}, {"orders", `{"traceparent": "garbage"}`}}
	for i := range MaxProducerLinks + 2 {
		p, _ := traceparent(100 + i)
		events = append(events, [2]string{"many", `{"traceparent": "` + p + `"}`})
	}
	h.waitAck(h.src.txHeaders(events...) + 0x10)
	h.stop()
	if err := h.ended(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	var batch sdktrace.ReadOnlySpan
	commits := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "deltabus.batch":
			batch = s
		case "deltabus.topic.commit":
			commits[attr(s, "deltabus.topic").AsString()] = s
		}
	}
	if batch == nil || len(commits) != 3 {
		t.Fatalf("spans: batch %v, topic commits %v", batch != nil, commits)
	}
	if got := attr(batch, "deltabus.events").AsInt64(); got != int64(len(events)) {
		t.Errorf("batch span: %d events, want %d", got, len(events))
	}
	for topic, s := range commits {
		if s.Parent().SpanID() != batch.SpanContext().SpanID() {
			t.Errorf("%s commit is not a child of the batch span", topic)
		}
		if attr(s, "deltabus.delta.version").Type() != attribute.INT64 {
			t.Errorf("%s commit has no Delta version", topic)
		}
	}
	if l := commits["orders"].Links(); len(l) != 1 || !l[0].SpanContext.Equal(sc1) {
		t.Errorf("orders links %v, want the one producer span %v", l, sc1)
	}
	if l := commits["payments"].Links(); len(l) != 1 || !l[0].SpanContext.Equal(sc2) {
		t.Errorf("payments links %v, want %v", l, sc2)
	}
	if l := commits["many"].Links(); len(l) != MaxProducerLinks || attr(commits["many"], "deltabus.producer_links.dropped").AsInt64() != 2 {
		t.Errorf("many: %d links, %v dropped; want %d and 2", len(l), attr(commits["many"], "deltabus.producer_links.dropped"), MaxProducerLinks)
	}
}

func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// TestUntracedBatchReadsNoHeaders: with tracing off, or a batch the
// sampler drops, events' headers are not read.
func TestUntracedBatchReadsNoHeaders(t *testing.T) {
	p, _ := traceparent(1)
	h := `{"traceparent": "` + p + `"}`
	never := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	for name, tp := range map[string]trace.TracerProvider{"off": nil, "not sampled": never} {
		bt := batchTrace{tracer: tracerOf(tp)}
		bt.event(&outbox.Event{Topic: "t", Headers: &h}, "t", time.Now())
		if bt.links != nil {
			t.Errorf("%s: headers read (%d topics linked)", name, len(bt.links))
		}
		bt.end(&batch{}, nil)
	}
}
