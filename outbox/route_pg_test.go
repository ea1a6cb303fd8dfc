package outbox_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/decoding"
	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// relationOf describes a table the way the decoder would: column names and
// type OIDs in attribute order.
func relationOf(t *testing.T, conn *pgx.Conn, schema, table string) *decoding.Relation {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT a.attname::text, a.atttypid::int8 FROM pg_attribute a
		WHERE a.attrelid = (quote_ident($1) || '.' || quote_ident($2))::regclass AND a.attnum > 0 AND NOT a.attisdropped
		ORDER BY a.attnum`, schema, table)
	if err != nil {
		t.Fatal(err)
	}
	rel := &decoding.Relation{ID: 1, Namespace: schema, Name: table}
	for rows.Next() {
		var c decoding.Column
		var oid int64
		if err := rows.Scan(&c.Name, &oid); err != nil {
			t.Fatal(err)
		}
		c.TypeOID = uint32(oid)
		rel.Columns = append(rel.Columns, c)
	}
	if rows.Err() != nil || len(rel.Columns) == 0 {
		t.Fatalf("columns of %s.%s: %v", schema, table, rows.Err())
	}
	return rel
}

// rowsAsText reads every row of rel as the replication stream would send
// it (each column's text output, NULL as DatumNull), ordered by orderBy.
func rowsAsText(t *testing.T, conn *pgx.Conn, rel *decoding.Relation, orderBy string) []*decoding.Row {
	t.Helper()
	var exprs []string
	for _, c := range rel.Columns {
		exprs = append(exprs, pgx.Identifier{c.Name}.Sanitize()+"::text")
	}
	sql := fmt.Sprintf("SELECT %s FROM %s ORDER BY %s", strings.Join(exprs, ", "),
		pgx.Identifier{rel.Namespace, rel.Name}.Sanitize(), orderBy)
	rows, err := conn.Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	var out []*decoding.Row
	for rows.Next() {
		vals := make([]*string, len(rel.Columns))
		dest := make([]any, len(vals))
		for i := range vals {
			dest[i] = &vals[i]
		}
		if err := rows.Scan(dest...); err != nil {
			t.Fatal(err)
		}
		row := &decoding.Row{Relation: rel, Op: decoding.OpInsert, Seq: len(out), Xid: 777,
			CommitLSN: pglogrepl.LSN(0x1_0000_0000 + len(out)), CommitTime: time.Unix(1_795_000_000, 0)}
		for _, v := range vals {
			if v == nil {
				row.New = append(row.New, decoding.Datum{Kind: decoding.DatumNull})
			} else {
				row.New = append(row.New, decoding.Datum{Kind: decoding.DatumText, Data: []byte(*v)})
			}
		}
		out = append(out, row)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	return out
}

func TestRouteRowsFromPostgreSQL(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx, conn := context.Background(), db.Conn(t)
	if _, err := migrations.Apply(ctx, conn, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	// A zone with a 45-minute offset, so the text output carries "+05:45".
	if _, err := conn.Exec(ctx, "SET TimeZone = 'Asia/Kathmandu'"); err != nil {
		t.Fatal(err)
	}
	db.Exec(t, `INSERT INTO public.outbox (id, topic, key, type, schema_version, payload, headers, occurred_at) VALUES
		('0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e5f', 'orders', 'o-1', 'OrderPlaced', 2,
		 '{"b": 1, "a": [1, 2.50, "x"], "name": "Zoë \"q\" ✓"}', '{"traceparent": "00-abc-01"}', '2026-11-30 07:48:59.123456+00'),
		('0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e60', 'billing.v2', 'b-1', 'Charged', 1, '[]', NULL, '1999-12-31 23:59:59.5-08'),
		('0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e61', 'orders', '', 'Empty', 1, '"just a string"', 'null', '2026-01-01 00:00:00+05:45')`)
	want := map[string]struct {
		payload, headers string
		at               time.Time
	}{
		"0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e5f": {`{"a": [1, 2.50, "x"], "b": 1, "name": "Zoë \"q\" ✓"}`, `{"traceparent": "00-abc-01"}`,
			time.Date(2026, 11, 30, 7, 48, 59, 123456000, time.UTC)},
		"0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e60": {`[]`, "", time.Date(2000, 1, 1, 7, 59, 59, 5e8, time.UTC)},
		"0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e61": {`"just a string"`, "null", time.Date(2025, 12, 31, 18, 15, 0, 0, time.UTC)},
	}
	r := outbox.NewRouter(outbox.Mappings{})
	rel := relationOf(t, conn, "public", "outbox")
	for _, row := range rowsAsText(t, conn, rel, "id") {
		ev, dl, err := r.Route(row)
		if err != nil || dl != nil {
			t.Fatalf("Route: %v, %+v", err, dl)
		}
		w := want[ev.ID]
		headers := ""
		if ev.Headers != nil {
			headers = *ev.Headers
		}
		if ev.Payload != w.payload || headers != w.headers || !ev.OccurredAt.Equal(w.at) || ev.OccurredAt.Location() != time.UTC {
			t.Errorf("event %s: payload %s headers %q occurred_at %v; want %s %q %v", ev.ID, ev.Payload, headers, ev.OccurredAt,
				w.payload, w.headers, w.at)
		}
	}
}

func TestRoutePoisonRowsFromPostgreSQL(t *testing.T) {
	db := pgtest.NewDB(t)
	conn := db.Conn(t)
	// A hand-made outbox without constraints, as a careless producer might have.
	db.Exec(t, `CREATE TABLE public.loose (n int, id text, topic text, key text, type text, schema_version text,
		payload text, headers text, occurred_at text)`)
	db.Exec(t, `INSERT INTO public.loose VALUES
		(1, '0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e5f', 'orders', 'k', 'T', '1', '{"ok": true}', NULL, '2026-11-30 07:48:59+00'),
		(2, 'nope', 'orders', 'k', 'T', '1', '{}', NULL, '2026-11-30 07:48:59+00'),
		(3, '0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e5f', 'Orders/EU', 'k', 'T', '1', '{}', NULL, '2026-11-30 07:48:59+00'),
		(4, '0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e5f', 'orders', NULL, 'T', '1', '{}', NULL, '2026-11-30 07:48:59+00'),
		(5, '0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e5f', 'orders', 'k', 'T', 'v2', '{}', NULL, '2026-11-30 07:48:59+00'),
		(6, '0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e5f', 'orders', 'k', 'T', '1', '{not json', NULL, '2026-11-30 07:48:59+00'),
		(7, '0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e5f', 'orders', 'k', 'T', '1', '{}', '[1,', '2026-11-30 07:48:59+00'),
		(8, '0195c1a4-7b1e-7c3d-8e9f-0a1b2c3d4e5f', 'orders', 'k', 'T', '1', '{}', NULL, 'yesterday'),
		(9, NULL, '..', 'k', NULL, '1', NULL, NULL, NULL)`)
	wantReasons := []string{
		"",
		`id "nope" in column "id" is not a uuid`,
		`invalid topic name "Orders/EU" in column "topic": uppercase letter 'O' at offset 0; topic names are lowercase`,
		`NULL key in column "key"`,
		`schema_version "v2" in column "schema_version" is not a 32-bit integer`,
		`payload in column "payload" is not valid JSON`,
		`headers in column "headers" is not valid JSON`,
		`occurred_at "yesterday" in column "occurred_at" is not an ISO timestamp`,
		`NULL id in column "id"; invalid topic name ".." in column "topic": starts with '.'; topic names start with a lowercase letter or digit; ` +
			`NULL type in column "type"; NULL payload in column "payload"`,
	}
	r := outbox.NewRouter(outbox.Mappings{})
	rows := rowsAsText(t, conn, relationOf(t, conn, "public", "loose"), "n")
	var lastID string
	for i, row := range rows {
		ev, dl, err := r.Route(row)
		if err != nil || (ev == nil) == (dl == nil) {
			t.Fatalf("row %d: Route = %v, %v, %v; want exactly one of event and dead letter", i+1, ev, dl, err)
		}
		if wantReasons[i] == "" {
			if ev == nil {
				t.Errorf("row %d: dead letter %q, want an event", i+1, dl.Reason)
			}
			continue
		}
		if dl != nil {
			lastID = dl.ID
		}
		if dl == nil || dl.Reason != wantReasons[i] {
			t.Errorf("row %d: %+v\nwant reason %q", i+1, dl, wantReasons[i])
			continue
		}
		if dl.SourceTable != "public.loose" || dl.ID == "" || !strings.HasPrefix(dl.RawRow, fmt.Sprintf(`{"n":"%d",`, i+1)) {
			t.Errorf("row %d: dead letter %+v", i+1, dl)
		}
	}
	if want := fmt.Sprintf("dl-%016X-%d", uint64(rows[8].CommitLSN), rows[8].Seq); lastID != want {
		t.Errorf("row 9 dead-letter id %q, want %q", lastID, want)
	}
	if s := r.Stats(); s.Events != 1 || s.DeadLetters != 8 {
		t.Errorf("Stats = %+v", s)
	}
}
