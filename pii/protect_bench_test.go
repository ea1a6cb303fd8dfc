package pii

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pii/classify"
)

// benchSchema marks the bench payloads' email and name personal, with the
// customer as the data subject.
const benchSchema = `{"x-deltabus-subject":"/customer","properties":{"customer":{"type":"string"},
  "email":{"type":"string","x-deltabus-pii":true},"name":{"type":"string","x-deltabus-pii":true}}}`

// BenchmarkProtectorEvent is the Protector alone on relay's
// BenchmarkPipelinePersonal payload (two personal fields of ~270 bytes,
// 100 subjects, keys warm): the part of the pipeline's extra cost that is
// the scan, the key look-up and the two AES-GCM seals.
func BenchmarkProtectorEvent(b *testing.B) {
	f := newFixture(b)
	c, err := classify.Parse([]byte(benchSchema))
	if err != nil {
		b.Fatal(err)
	}
	f.cls.Add("orders", "OrderPlaced", 1, c)
	payloads := make([]string, 100)
	for n := range payloads {
		payloads[n] = fmt.Sprintf(`{"order_id": %d, "customer": "customer-%d", "email": "customer-%d@example.com", "name": "Customer Number %d", "amount": 12.5, "currency": "EUR", "lines": [{"sku": "sku-77", "qty": 3}], "note": "a realistic order created event with some padding text"}`, n, n, n, n)
	}
	ctx, sc, now := context.Background(), &Scratch{}, time.Now()
	ev := outbox.Event{ID: "00000000-0000-4000-8000-000000000001", Topic: "orders", Type: "OrderPlaced", SchemaVersion: 1, OccurredAt: now}
	for _, p := range payloads { // the keys exist and are cached, as in a long run
		ev.Payload = p
		if dl, err := f.p.Event(ctx, &ev, sc); dl != nil || err != nil {
			b.Fatal(dl, err)
		}
	}
	b.ReportAllocs()
	n, cpu0 := 0, cpuTime()
	for b.Loop() {
		ev.Payload = payloads[n%len(payloads)]
		n++
		if dl, err := f.p.Event(ctx, &ev, sc); dl != nil || err != nil {
			b.Fatal(dl, err)
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(n), "cpu-ns/event") // the process's CPU: a loaded machine inflates ns/op
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkScan is the scan alone (finding BenchmarkProtectorEvent's two
// personal leaves and its subject in the payload).
func BenchmarkScan(b *testing.B) {
	c, err := classify.Parse([]byte(benchSchema))
	if err != nil {
		b.Fatal(err)
	}
	m := compile(c).all
	payload := []byte(`{"order_id": 7, "customer": "customer-7", "email": "customer-7@example.com", "name": "Customer Number 7", "amount": 12.5, "currency": "EUR", "lines": [{"sku": "sku-77", "qty": 3}], "note": "a realistic order created event with some padding text"}`)
	var s scanner
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if f, err := s.scan(payload, m); err != nil || len(f.spans) != 2 {
			b.Fatal(f, err)
		}
	}
}
