package relay

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/pii"
	"github.com/deltabus/deltabus/pii/classify"
	"github.com/deltabus/deltabus/pii/keys"
	"github.com/deltabus/deltabus/tests/pgtest"
)

// piiBenchSchema marks two fields of piiBenchPayload personal.
const piiBenchSchema = `{"x-deltabus-subject":"/customer","properties":{"customer":{"type":"string"},
  "email":{"type":"string","x-deltabus-pii":true},"name":{"type":"string","x-deltabus-pii":true}}}`

// piiBenchPayload is benchPayload with an email and a name (~270 bytes),
// for customer c of 100.
func piiBenchPayload(n int) string {
	c := n % 100
	return fmt.Sprintf(`{"order_id": %d, "customer": "customer-%d", "email": "customer-%d@example.com", "name": "Customer Number %d", "amount": 12.5, "currency": "EUR", "lines": [{"sku": "sku-77", "qty": 3}], "note": "a realistic order created event with some padding text"}`, n, c, c, c)
}

// BenchmarkPipelinePersonal is BenchmarkPipeline's 1,000-row transactions
// with two personal fields in every event (100 subjects over 5 topics, so
// 500 data keys, created in the key table of a real PostgreSQL on the first
// round), without and with the Protector, in the same run: the cost of
// encryption in relay CPU per event (issue 28's bound: at most 1.3 times).
func BenchmarkPipelinePersonal(b *testing.B) {
	TuneRuntime()
	frames, end := framesOf(20, 1000, piiBenchPayload)
	events := 20 * 1000
	prot := benchProtector(b)
	var plain time.Duration
	for _, c := range []struct {
		name string
		p    *pii.Protector
	}{{"plain", nil}, {"encrypted", prot}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var cpu time.Duration
			for b.Loop() {
				cpu += playPipelineWith(b, frames, end, c.p)
			}
			per := cpu / time.Duration(b.N)
			b.ReportMetric(float64(per.Microseconds())/float64(events), "cpu-us/event")
			if c.p == nil {
				plain = per
			} else if plain > 0 {
				b.ReportMetric(float64(per)/float64(plain), "x-plain")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

func benchProtector(b *testing.B) *pii.Protector {
	db := pgtest.NewDB(b)
	ctx := context.Background()
	if _, err := migrations.ApplyKeys(ctx, db.Conn(b)); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "kek.json")
	if _, err := keys.WriteKEKFile(path); err != nil {
		b.Fatal(err)
	}
	kek, err := keys.OpenKEK(ctx, "file://"+path)
	if err != nil {
		b.Fatal(err)
	}
	ks, err := keys.Open(ctx, db.DSN, kek, keys.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ks.Close)
	c, err := classify.Parse([]byte(piiBenchSchema))
	if err != nil {
		b.Fatal(err)
	}
	cls := classify.NewStatic()
	for _, t := range []string{"orders", "payments", "tenants", "ingestion", "quality"} {
		cls.Add(t, "OrderPlaced", 1, c)
	}
	p, err := pii.NewProtector(cls, ks)
	if err != nil {
		b.Fatal(err)
	}
	return p
}
