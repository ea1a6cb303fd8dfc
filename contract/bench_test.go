package contract

import (
	"context"
	"testing"
)

// benchSchema is the contract of the drain benchmark's payload (package
// bench, payloadSQL), as PostgreSQL's jsonb prints it.
const (
	benchSchema = `{"type":"object","required":["order_id","customer","amount","currency","lines"],
	"properties":{"order_id":{"type":"integer","minimum":0},"customer":{"type":"string","minLength":1},
	"amount":{"type":"number","minimum":0},"currency":{"enum":["EUR","USD","GBP"]},
	"lines":{"type":"array","minItems":1,"items":{"type":"object","required":["sku","qty"],
	"properties":{"sku":{"type":"string","pattern":"^sku-[0-9]+$"},"qty":{"type":"integer","minimum":1}},"additionalProperties":false}},
	"note":{"type":"string","maxLength":200}},"additionalProperties":false}`
	benchPayload = `{"note": "a realistic order created event with some padding text", "lines": [{"qty": 3, "sku": "sku-123"}], "amount": 312.50, "currency": "EUR", "customer": "customer-4711", "order_id": 123456}`
)

// BenchmarkValidate: one event of the drain benchmark's shape, by the fast
// path (what the relay runs) and by the library alone.
func BenchmarkValidate(b *testing.B) {
	s := compileT(b, benchSchema)
	p := []byte(benchPayload)
	if v := s.Validate(p); v != nil || s.fastResult(p) != valid {
		b.Fatalf("bench payload: %v", v)
	}
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = s.Validate(p)
		}
	})
	b.Run("library", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = s.validateSlow(p)
		}
	})
}

// BenchmarkCacheCheck: the relay's whole per-event check (index lookups
// and validation) of a registered type.
func BenchmarkCacheCheck(b *testing.B) {
	ctx := context.Background()
	st := newStoreB(b)
	if _, err := NewRegistry(st, nil).Register(ctx, Registration{Topic: "orders", Type: "Created", Version: 1, Schema: []byte(benchSchema)}); err != nil {
		b.Fatal(err)
	}
	c := New(st, Options{})
	p := []byte(benchPayload)
	b.ReportAllocs()
	for b.Loop() {
		if v, err := c.Check(ctx, "orders", "Created", 1, p); v != nil || err != nil {
			b.Fatal(v, err)
		}
	}
}
