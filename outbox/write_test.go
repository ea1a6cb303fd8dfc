package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// countingTracer counts the statements a connection sends.
type countingTracer struct{ n atomic.Int64 }

func (c *countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// stored is an outbox row as read back.
type stored struct {
	id, topic, key, typ, payload string
	sv                           int32
	headers                      *string
	at                           time.Time
	xmin                         string
}

// outboxDB returns a test database with the DeltaBus outbox applied and a
// connection that counts its statements.
func outboxDB(t *testing.T) (*pgtest.DB, *pgx.Conn, *countingTracer) {
	db := pgtest.NewDB(t)
	ctx := context.Background()
	if _, err := migrations.Apply(ctx, db.Conn(t), migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	tr := &countingTracer{}
	cfg.Tracer = tr
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return db, conn, tr
}

func TestWriteThousandEventsInOneStatement(t *testing.T) {
	_, conn, tr := outboxDB(t)
	ctx := context.Background()
	at := time.Date(2026, 11, 30, 7, 48, 59, 123456000, time.UTC)
	events := make([]outbox.NewEvent, 1000)
	for i := range events {
		events[i] = outbox.NewEvent{Topic: fmt.Sprintf("topic-%d", i%7), Key: fmt.Sprintf("k%d", i%13), Type: "Tested",
			Payload: map[string]int{"i": i}}
		switch i % 4 {
		case 0:
			events[i].ID = outbox.NewID()
			events[i].OccurredAt = at.Add(time.Duration(i) * time.Microsecond)
		case 1:
			events[i].Headers = map[string]string{"traceparent": fmt.Sprintf("00-%032x-%016x-01", i, i)}
			events[i].SchemaVersion = 3
		case 2:
			events[i].Payload = json.RawMessage(fmt.Sprintf(`{"raw": %d, "nested": {"b": [1, 2]}}`, i))
			events[i].Headers = json.RawMessage(`{"a": {"b": "c"}}`)
		}
	}
	// The commit must be flushed for the slot to see it, whatever the server's default.
	if _, err := conn.Exec(ctx, "SET synchronous_commit = on"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_create_logical_replication_slot('order_check', 'test_decoding')"); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := tr.n.Load()
	if err := outbox.Write(ctx, tx, events...); err != nil {
		t.Fatal(err)
	}
	if sent := tr.n.Load() - before; sent != 1 {
		t.Errorf("Write sent %d statements for 1000 events, want 1", sent)
	}
	var txNow time.Time
	if err := tx.QueryRow(ctx, "SELECT now()").Scan(&txNow); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	rows, err := conn.Query(ctx, `SELECT id::text, topic, key, type, schema_version, payload::text, headers::text, occurred_at,
		xmin::text FROM public.outbox ORDER BY (payload->>'i')::int, (payload->>'raw')::int`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (s stored, err error) {
		err = r.Scan(&s.id, &s.topic, &s.key, &s.typ, &s.sv, &s.payload, &s.headers, &s.at, &s.xmin)
		return s, err
	})
	if err != nil || len(got) != len(events) {
		t.Fatalf("read back %d rows (%v), want %d", len(got), err, len(events))
	}
	sort.Slice(got, func(a, b int) bool { return payloadIndex(got[a].payload) < payloadIndex(got[b].payload) })
	for i, s := range got {
		e := events[i]
		if e.ID != "" && s.id != e.ID || len(s.id) != 36 || s.topic != e.Topic || s.key != e.Key || s.xmin != got[0].xmin {
			t.Fatalf("row %d = %+v, event %+v", i, s, e)
		}
		wantAt, wantSV := txNow, int32(1)
		if !e.OccurredAt.IsZero() {
			wantAt = e.OccurredAt
		}
		if e.SchemaVersion != 0 {
			wantSV = e.SchemaVersion
		}
		if !s.at.Equal(wantAt) || s.sv != wantSV {
			t.Fatalf("row %d: occurred_at %v schema_version %d, want %v %d", i, s.at, s.sv, wantAt, wantSV)
		}
		if (s.headers != nil) != (e.Headers != nil) {
			t.Fatalf("row %d: headers %v, event headers %v", i, s.headers, e.Headers)
		}
	}
	checkStreamOrder(t, conn, got)
	if got[2].payload != `{"raw": 2, "nested": {"b": [1, 2]}}` || *got[2].headers != `{"a": {"b": "c"}}` {
		t.Errorf("raw JSON stored as %s / %s", got[2].payload, *got[2].headers)
	}
	if got[1].payload != `{"i": 1}` || !strings.Contains(*got[1].headers, `"traceparent": "00-`) {
		t.Errorf("marshalled JSON stored as %s / %v", got[1].payload, *got[1].headers)
	}
}

func TestWriteRejectsInvalidEventsBeforeSending(t *testing.T) {
	_, conn, tr := outboxDB(t)
	ctx := context.Background()
	good := outbox.NewEvent{Topic: "orders", Key: "k", Type: "T", Payload: json.RawMessage(`{}`)}
	tests := []struct {
		edit func(*outbox.NewEvent)
		want string
	}{
		{func(e *outbox.NewEvent) { e.Topic = "Orders/EU" }, `outbox event 5 (topic "Orders/EU"): invalid topic name "Orders/EU"`},
		{func(e *outbox.NewEvent) { e.Topic = outbox.DeadLetterTopic }, `reserved for internal tables`},
		{func(e *outbox.NewEvent) { e.ID = "42" }, `id "42" is not a uuid`},
		{func(e *outbox.NewEvent) { e.Payload = nil }, `payload is required`},
		{func(e *outbox.NewEvent) { e.Payload = json.RawMessage(`{"a":`) }, `payload: payload/headers bytes are not valid JSON text`},
		{func(e *outbox.NewEvent) { e.Headers = func() {} }, `headers: json: unsupported type`},
		{func(e *outbox.NewEvent) { e.SchemaVersion = -1 }, `schema version -1 is negative`},
	}
	for _, tt := range tests {
		events := []outbox.NewEvent{good, good, good, good, good, good, good}
		tt.edit(&events[5])
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		before := tr.n.Load()
		err = outbox.Write(ctx, tx, events...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Write error = %v, want it to contain %q", err, tt.want)
		}
		if sent := tr.n.Load() - before; sent != 0 {
			t.Errorf("Write sent %d statements before failing", sent)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM public.outbox").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows written by failed Writes (%v)", n, err)
	}
}

func TestWriterDebeziumTable(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx, conn := context.Background(), db.Conn(t)
	db.Exec(t, `CREATE SCHEMA legacy; CREATE TABLE legacy.outboxevent (id uuid primary key, aggregatetype varchar(255) not null,
		aggregateid varchar(255) not null, type varchar(255) not null, payload jsonb)`)
	w := outbox.Writer{Table: "legacy.outboxevent", Mapping: outbox.DebeziumMapping()}
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		return w.Write(ctx, tx, outbox.NewEvent{Topic: "customer", Key: "c-1", Type: "Created", Payload: map[string]string{"n": "Ada"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	var topic, key, payload string
	err = conn.QueryRow(ctx, "SELECT aggregatetype, aggregateid, payload::text FROM legacy.outboxevent").Scan(&topic, &key, &payload)
	if err != nil || topic != "customer" || key != "c-1" || payload != `{"n": "Ada"}` {
		t.Fatalf("stored %q %q %q (%v)", topic, key, payload, err)
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		return w.Write(ctx, tx, outbox.NewEvent{Topic: "customer", Key: "c-1", Type: "Created", Payload: 1,
			Headers: map[string]string{"a": "b"}})
	})
	if err == nil || !strings.Contains(err.Error(), "the table has no headers column") {
		t.Fatalf("headers into a table without headers: %v", err)
	}
}

// payloadIndex reads the event index out of a test payload.
func payloadIndex(payload string) int {
	var p struct{ I, Raw int }
	_ = json.Unmarshal([]byte(payload), &p)
	return p.I + p.Raw
}

// checkStreamOrder reads the test_decoding slot "order_check" and checks
// that the rows reached the WAL in argument order, with ids ordered like got.
func checkStreamOrder(t *testing.T, conn *pgx.Conn, got []stored) {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT data FROM pg_logical_slot_get_changes('order_check', NULL, NULL)
		WHERE data LIKE 'table public.outbox: INSERT:%'`)
	if err != nil {
		t.Fatal(err)
	}
	changes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != len(got) {
		t.Fatalf("slot saw %d inserts, want %d", len(changes), len(got))
	}
	for i, c := range changes {
		if !strings.Contains(c, "id[uuid]:'"+got[i].id+"'") {
			t.Fatalf("insert %d in the WAL is %s, want id %s: rows are not in argument order", i, c, got[i].id)
		}
	}
}
