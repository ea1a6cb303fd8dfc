package outbox

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/decoding"
	"github.com/jackc/pglogrepl"
)

const (
	oidUUID        = 2950
	oidText        = 25
	oidInt4        = 23
	oidTimestamptz = 1184
)

var commitTime = time.Date(2026, 11, 30, 7, 49, 0, 123456789, time.FixedZone("x", 3600))

func outboxRelation() *decoding.Relation {
	return &decoding.Relation{ID: 16400, Namespace: "public", Name: "outbox", Columns: []decoding.Column{
		{Name: "id", TypeOID: oidUUID, Key: true}, {Name: "topic", TypeOID: oidText}, {Name: "key", TypeOID: oidText},
		{Name: "type", TypeOID: oidText}, {Name: "schema_version", TypeOID: oidInt4}, {Name: "payload", TypeOID: oidJSONB},
		{Name: "headers", TypeOID: oidJSONB}, {Name: "occurred_at", TypeOID: oidTimestamptz},
	}}
}

func txt(s string) decoding.Datum { return decoding.Datum{Kind: decoding.DatumText, Data: []byte(s)} }

var null = decoding.Datum{Kind: decoding.DatumNull}

// goodTuple is a valid row of outboxRelation.
func goodTuple() []decoding.Datum {
	return []decoding.Datum{
		txt("0195C1A4-7B1E-7C3D-8E9F-0A1B2C3D4E5F"), txt("orders"), txt("order-42"), txt("OrderPlaced"), txt("2"),
		txt(`{"total": 12.5, "items": [1, 2]}`), txt(`{"traceparent": "00-abc-01"}`), txt("2026-11-30 08:48:59.123456+01"),
	}
}

func newRow(rel *decoding.Relation, op decoding.Op, tuple []decoding.Datum) *decoding.Row {
	return &decoding.Row{Relation: rel, Op: op, Seq: 3, New: tuple, Xid: 4242,
		CommitLSN: pglogrepl.LSN(0x16B374D848), CommitTime: commitTime}
}

func TestRouteValidInsert(t *testing.T) {
	r := NewRouter(Mappings{})
	row := newRow(outboxRelation(), decoding.OpInsert, goodTuple())
	ev, dl, err := r.Route(row)
	if err != nil || dl != nil || ev == nil {
		t.Fatalf("Route = %+v, %+v, %v; want an event", ev, dl, err)
	}
	for i := range row.New { // the event must not alias the decoder's buffer
		for j := range row.New[i].Data {
			row.New[i].Data[j] = 'X'
		}
	}
	headers := `{"traceparent": "00-abc-01"}`
	want := Event{
		ID: "0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e5f", Topic: "orders", Key: "order-42", Type: "OrderPlaced",
		SchemaVersion: 2, Payload: `{"total": 12.5, "items": [1, 2]}`, Headers: &headers,
		OccurredAt: time.Date(2026, 11, 30, 7, 48, 59, 123456000, time.UTC),
		CommitLSN:  0x16B374D848, Seq: 3, Xid: 4242, CommitTime: time.Date(2026, 11, 30, 6, 49, 0, 123456000, time.UTC),
	}
	checkEvent(t, ev, want)
	if s := r.Stats(); s != (RouteStats{Events: 1}) {
		t.Errorf("Stats = %+v", s)
	}
}

func checkEvent(t *testing.T, got *Event, want Event) {
	t.Helper()
	if (got.Headers == nil) != (want.Headers == nil) || got.Headers != nil && *got.Headers != *want.Headers {
		t.Errorf("Headers = %v, want %v", strp(got.Headers), strp(want.Headers))
	}
	g, w := *got, want
	g.Headers, w.Headers = nil, nil
	if g.OccurredAt.Location() != time.UTC || g.CommitTime.Location() != time.UTC {
		t.Errorf("times not UTC: %v, %v", g.OccurredAt, g.CommitTime)
	}
	if !g.OccurredAt.Equal(w.OccurredAt) || !g.CommitTime.Equal(w.CommitTime) {
		t.Errorf("times = %v, %v; want %v, %v", g.OccurredAt, g.CommitTime, w.OccurredAt, w.CommitTime)
	}
	g.OccurredAt, w.OccurredAt, g.CommitTime, w.CommitTime = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if g != w {
		t.Errorf("event = %+v\nwant    %+v", g, w)
	}
}

func strp(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func TestRouteOptionalDefaults(t *testing.T) {
	r := NewRouter(Mappings{})
	tuple := goodTuple()
	tuple[4], tuple[6], tuple[7] = null, null, null
	ev, dl, err := r.Route(newRow(outboxRelation(), decoding.OpInsert, tuple))
	if err != nil || dl != nil {
		t.Fatalf("Route: %v, %+v", err, dl)
	}
	if ev.SchemaVersion != 1 || ev.Headers != nil || !ev.OccurredAt.Equal(commitTime.Truncate(time.Microsecond)) {
		t.Errorf("defaults: schema_version %d, headers %v, occurred_at %v", ev.SchemaVersion, strp(ev.Headers), ev.OccurredAt)
	}
}

func TestRouteDebezium(t *testing.T) {
	rel := &decoding.Relation{ID: 7, Namespace: "legacy", Name: "outboxevent", Columns: []decoding.Column{
		{Name: "id", TypeOID: oidUUID}, {Name: "aggregatetype", TypeOID: oidText}, {Name: "aggregateid", TypeOID: oidText},
		{Name: "type", TypeOID: oidText}, {Name: "payload", TypeOID: oidText}, {Name: "tracingspancontext", TypeOID: oidText},
	}}
	ms := Mappings{Tables: map[string]Mapping{"legacy.outboxevent": DebeziumMapping()}}
	r := NewRouter(ms)
	tuple := []decoding.Datum{txt("0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e5f"), txt("customer"), txt("c-1"),
		txt("CustomerCreated"), txt(`{"name":"Ada"}`), null}
	ev, dl, err := r.Route(newRow(rel, decoding.OpInsert, tuple))
	if err != nil || dl != nil {
		t.Fatalf("Route: %v, %+v", err, dl)
	}
	if ev.Topic != "customer" || ev.Key != "c-1" || ev.Payload != `{"name":"Ada"}` || ev.SchemaVersion != 1 ||
		ev.Headers != nil || !ev.OccurredAt.Equal(commitTime) && !ev.OccurredAt.Equal(commitTime.Truncate(time.Microsecond)) {
		t.Errorf("event = %+v", ev)
	}
	// payload is text here, so it is checked as JSON.
	tuple[4] = txt(`{"name":`)
	_, dl, _ = r.Route(newRow(rel, decoding.OpInsert, tuple))
	if dl == nil || dl.Reason != `payload in column "payload" is not valid JSON` {
		t.Errorf("invalid text payload: dl = %+v", dl)
	}
}

func TestRouteIgnoresDeleteAndTruncate(t *testing.T) {
	r := NewRouter(Mappings{})
	rel := outboxRelation()
	del := &decoding.Row{Relation: rel, Op: decoding.OpDelete, Old: goodTuple()[:1]}
	trunc := &decoding.Row{Relation: rel, Op: decoding.OpTruncate}
	for _, row := range []*decoding.Row{del, trunc, del} {
		if ev, dl, err := r.Route(row); ev != nil || dl != nil || err != nil {
			t.Errorf("Route(op %d) = %v, %v, %v; want nothing", row.Op, ev, dl, err)
		}
	}
	if s := r.Stats(); s != (RouteStats{Deletes: 2, Truncates: 1}) {
		t.Errorf("Stats = %+v", s)
	}
}

func TestRouteUpdateIsDeadLetter(t *testing.T) {
	r := NewRouter(Mappings{})
	tuple := goodTuple()
	tuple[5] = decoding.Datum{Kind: decoding.DatumUnchanged}
	ev, dl, err := r.Route(newRow(outboxRelation(), decoding.OpUpdate, tuple))
	if err != nil || ev != nil || dl == nil {
		t.Fatalf("Route(UPDATE) = %v, %v, %v", ev, dl, err)
	}
	wantReason := ReasonUpdate + `; column "payload" (payload) is an unchanged TOAST value: not sent, so unknown`
	if dl.Reason != wantReason {
		t.Errorf("Reason = %q\nwant     %q", dl.Reason, wantReason)
	}
	if dl.ID != "0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e5f" || dl.Topic != "orders" || dl.Payload != "" || dl.SourceTable != "public.outbox" {
		t.Errorf("dead letter = %+v", dl)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(dl.RawRow), &raw); err != nil {
		t.Fatalf("RawRow %q: %v", dl.RawRow, err)
	}
	if m, ok := raw["payload"].(map[string]any); !ok || m["unchanged_toast"] != true {
		t.Errorf("RawRow payload = %v, want the unchanged-TOAST marker", raw["payload"])
	}
	if s := r.Stats(); s != (RouteStats{DeadLetters: 1, Updates: 1}) {
		t.Errorf("Stats = %+v", s)
	}
}

func TestRouteDeadLetterReasons(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(tu []decoding.Datum)
		reason string
	}{
		{"null id", func(tu []decoding.Datum) { tu[0] = null }, `NULL id in column "id"`},
		{"id not uuid", func(tu []decoding.Datum) { tu[0] = txt("42") }, `id "42" in column "id" is not a uuid`},
		{"null topic", func(tu []decoding.Datum) { tu[1] = null }, `NULL topic in column "topic"`},
		{"bad topic", func(tu []decoding.Datum) { tu[1] = txt("a/b") },
			`invalid topic name "a/b" in column "topic": character '/' at offset 1 is not allowed (allowed: a-z 0-9 . _ -)`},
		{"reserved topic", func(tu []decoding.Datum) { tu[1] = txt("_dead_letter") },
			`invalid topic name "_dead_letter" in column "topic": names starting with "_" are reserved for internal tables`},
		{"null key", func(tu []decoding.Datum) { tu[2] = null }, `NULL key in column "key"`},
		{"null type", func(tu []decoding.Datum) { tu[3] = null }, `NULL type in column "type"`},
		{"bad schema_version", func(tu []decoding.Datum) { tu[4] = txt("1.5") },
			`schema_version "1.5" in column "schema_version" is not a 32-bit integer`},
		{"null payload", func(tu []decoding.Datum) { tu[5] = null }, `NULL payload in column "payload"`},
		{"bad occurred_at", func(tu []decoding.Datum) { tu[7] = txt("infinity") },
			`occurred_at "infinity" in column "occurred_at" is not an ISO timestamp`},
		{"binary", func(tu []decoding.Datum) { tu[3] = decoding.Datum{Kind: decoding.DatumBinary, Data: []byte{1}} },
			`column "type" (type) came in binary format (kind 'b'); the relay reads text`},
		{"two problems", func(tu []decoding.Datum) { tu[1] = txt("Orders"); tu[2] = null },
			`invalid topic name "Orders" in column "topic": uppercase letter 'O' at offset 0; topic names are lowercase; NULL key in column "key"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tuple := goodTuple()
			tt.edit(tuple)
			ev, dl, err := NewRouter(Mappings{}).Route(newRow(outboxRelation(), decoding.OpInsert, tuple))
			if err != nil || ev != nil || dl == nil {
				t.Fatalf("Route = %v, %v, %v; want a dead letter", ev, dl, err)
			}
			if dl.Reason != tt.reason {
				t.Errorf("Reason = %q\nwant     %q", dl.Reason, tt.reason)
			}
			if dl.ID == "" || dl.SourceTable != "public.outbox" || !json.Valid([]byte(dl.RawRow)) {
				t.Errorf("dead letter = %+v", dl)
			}
		})
	}
}

func TestDeadLetterSyntheticID(t *testing.T) {
	tuple := goodTuple()
	tuple[0], tuple[1] = txt("not-a-uuid"), txt("Bad Topic")
	_, dl, _ := NewRouter(Mappings{}).Route(newRow(outboxRelation(), decoding.OpInsert, tuple))
	if dl.ID != "dl-00000016B374D848-3" {
		t.Errorf("ID = %q, want the synthetic dl-<lsn>-<seq>", dl.ID)
	}
	if dl.Topic != "Bad Topic" || dl.Key != "order-42" || dl.SchemaVersion != 2 || strp(dl.Headers) != `{"traceparent": "00-abc-01"}` {
		t.Errorf("extracted fields = %+v", dl.Event)
	}
	if !dl.OccurredAt.Equal(time.Date(2026, 11, 30, 7, 48, 59, 123456000, time.UTC)) || dl.Xid != 4242 || dl.Seq != 3 {
		t.Errorf("times/txn = %v %d %d", dl.OccurredAt, dl.Xid, dl.Seq)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(dl.RawRow), &raw); err != nil {
		t.Fatal(err)
	}
	if raw["id"] != "not-a-uuid" || raw["topic"] != "Bad Topic" || raw["payload"] != `{"total": 12.5, "items": [1, 2]}` {
		t.Errorf("RawRow = %s", dl.RawRow)
	}
}

func TestRouteNonOutboxTable(t *testing.T) {
	rel := &decoding.Relation{ID: 9, Namespace: "public", Name: "orders", Columns: []decoding.Column{
		{Name: "id", TypeOID: oidUUID}, {Name: "key", TypeOID: oidText}, {Name: "note", TypeOID: oidText}}}
	tuple := []decoding.Datum{txt("0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e5f"), txt("k"), null}
	_, dl, err := NewRouter(Mappings{}).Route(newRow(rel, decoding.OpInsert, tuple))
	if err != nil || dl == nil {
		t.Fatalf("Route = %v, %v", dl, err)
	}
	want := `table public.orders is not an outbox: missing column "topic" (topic), missing column "type" (type), ` +
		`missing column "schema_version" (schema_version), missing column "payload" (payload), ` +
		`missing column "headers" (headers), missing column "occurred_at" (occurred_at)`
	if dl.Reason != want {
		t.Errorf("Reason = %q\nwant     %q", dl.Reason, want)
	}
	if dl.RawRow != `{"id":"0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e5f","key":"k","note":null}` {
		t.Errorf("RawRow = %s", dl.RawRow)
	}
}

func TestRouteNewRelationReplacesPlan(t *testing.T) {
	r := NewRouter(Mappings{})
	rel := outboxRelation()
	if ev, _, _ := r.Route(newRow(rel, decoding.OpInsert, goodTuple())); ev == nil {
		t.Fatal("first row not an event")
	}
	// ALTER TABLE: a column is added before payload; the decoder sends a new Relation with the same ID.
	rel2 := outboxRelation()
	rel2.Columns = append([]decoding.Column{{Name: "tenant", TypeOID: oidText}}, rel2.Columns...)
	ev, dl, err := r.Route(newRow(rel2, decoding.OpInsert, append([]decoding.Datum{txt("t1")}, goodTuple()...)))
	if err != nil || dl != nil || ev.Topic != "orders" || ev.Type != "OrderPlaced" {
		t.Fatalf("after new relation: %+v, %+v, %v", ev, dl, err)
	}
}

func TestRouteDecoderErrors(t *testing.T) {
	r := NewRouter(Mappings{})
	rel := outboxRelation()
	for name, row := range map[string]*decoding.Row{
		"nil relation": {Op: decoding.OpInsert},
		"short tuple":  newRow(rel, decoding.OpInsert, goodTuple()[:3]),
		"no tuple":     newRow(rel, decoding.OpInsert, nil),
		"unknown op":   newRow(rel, decoding.Op(9), goodTuple()),
	} {
		if _, _, err := r.Route(row); err == nil {
			t.Errorf("%s: Route returned no error", name)
		}
	}
	if _, _, err := r.Route(nil); err == nil || !strings.Contains(err.Error(), "without relation") {
		t.Errorf("Route(nil) = %v", err)
	}
}

func TestRouteAllocations(t *testing.T) {
	r := NewRouter(Mappings{})
	row := newRow(outboxRelation(), decoding.OpInsert, goodTuple())
	if n := testing.AllocsPerRun(1000, func() { _, _, _ = r.Route(row) }); n > 2 {
		t.Errorf("Route allocates %v times per valid row, want at most 2 (event + text)", n)
	}
}

func BenchmarkRoute(b *testing.B) {
	r := NewRouter(Mappings{})
	tuple := goodTuple()
	tuple[5] = txt(`{"order_id": "o-1234567890", "customer": {"id": "c-42", "tier": "gold"}, "lines": [` +
		`{"sku": "A-1", "qty": 2, "price": 12.5}, {"sku": "B-7", "qty": 1, "price": 99.0}], "currency": "EUR"}`)
	row := newRow(outboxRelation(), decoding.OpInsert, tuple)
	b.ReportAllocs()
	for b.Loop() {
		if ev, _, _ := r.Route(row); ev == nil {
			b.Fatal("not an event")
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkRouteTextPayload routes rows whose payload column is text, so
// every payload is checked to be JSON.
func BenchmarkRouteTextPayload(b *testing.B) {
	rel := outboxRelation()
	rel.Columns[5].TypeOID, rel.Columns[6].TypeOID = oidText, oidText
	r := NewRouter(Mappings{})
	tuple := goodTuple()
	tuple[5] = txt(`{"order_id": "o-1234567890", "customer": {"id": "c-42", "tier": "gold"}, "lines": [` +
		`{"sku": "A-1", "qty": 2, "price": 12.5}, {"sku": "B-7", "qty": 1, "price": 99.0}], "currency": "EUR"}`)
	row := newRow(rel, decoding.OpInsert, tuple)
	b.ReportAllocs()
	for b.Loop() {
		if ev, _, _ := r.Route(row); ev == nil {
			b.Fatal("not an event")
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
