package decoding

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

const outboxDDL = `CREATE TABLE outbox (
	id uuid PRIMARY KEY, topic text NOT NULL, key text, type text NOT NULL,
	schema_version int NOT NULL DEFAULT 1, payload jsonb NOT NULL, headers jsonb,
	occurred_at timestamptz NOT NULL DEFAULT now())`

// inTx runs fn in one transaction on conn and returns the transaction's xid
// and the WAL insert position after its commit.
func inTx(t *testing.T, conn *pgx.Conn, fn func(exec func(sql string, args ...any))) (uint32, pglogrepl.LSN) {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var xid int64
	if err := tx.QueryRow(ctx, `SELECT txid_current()`).Scan(&xid); err != nil {
		t.Fatal(err)
	}
	fn(func(sql string, args ...any) {
		if _, err := tx.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var after pglogrepl.LSN
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	return uint32(xid), after
}

const insertSQL = `INSERT INTO outbox (id, topic, key, type, payload, headers, occurred_at) VALUES ($1, $2, $3, 'OrderPlaced', $4, $5, $6)`

// TestDecodeRealStream decodes a real pgoutput stream covering single and
// multi-row transactions, logical messages, ADD COLUMN inside a transaction,
// a TOASTed value left unchanged by an UPDATE, a key-changing UPDATE, a
// DELETE and a TRUNCATE, and checks every message exactly.
func TestDecodeRealStream(t *testing.T) {
	db := pgtest.NewDB(t)
	db.Exec(t, outboxDDL)
	db.Exec(t, `CREATE PUBLICATION pub FOR TABLE outbox`)
	// A non-UTC session time zone shows offsets in the stream's timestamptz text.
	db.ReplDSN += "&timezone=Asia%2FKolkata&datestyle=ISO"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	repl, slot := replSlot(t, ctx, db, "s")
	conn := db.Conn(t)
	w := runRealWorkload(t, db, conn)
	got := decodeAll(t, ctx, repl, slot, pgoutputArgs("pub"))

	want := w.wantStream(t, conn)
	lines := summaries(got, w.xids)
	if len(lines) != len(want) {
		t.Fatalf("decoded %d messages, want %d:\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
	for i, line := range lines {
		if line != want[i] {
			t.Errorf("message %d:\n got %s\nwant %s", i, line, want[i])
		}
	}
	checkTransactions(t, got, w.xids, w.bounds)
}

// realWorkload is what runRealWorkload did: its transactions' xids, the WAL
// insert positions before the first and after each transaction, and values.
type realWorkload struct {
	ids           []string
	xids          []uint32
	bounds        []pglogrepl.LSN
	payload1, big string
	occurred      time.Time
}

func runRealWorkload(t *testing.T, db *pgtest.DB, conn *pgx.Conn) *realWorkload {
	w := &realWorkload{
		payload1: `{"name": "Zoë \"the\" 🚀", "nested": {"a": [1, 2.50, null, true]}, "bs": "back\\slash", "nl": "a\nb"}`,
		big:      fmt.Sprintf(`{"blob": %q}`, randomHex(40000)), // TOASTed
		occurred: time.Date(2026, 11, 30, 7, 48, 59, 123456000, time.UTC),
		ids:      make([]string, 8),
	}
	for i := range w.ids {
		w.ids[i] = fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1)
	}
	var start pglogrepl.LSN
	if err := conn.QueryRow(context.Background(), `SELECT pg_current_wal_insert_lsn()::text`).Scan(&start); err != nil {
		t.Fatal(err)
	}
	w.bounds = []pglogrepl.LSN{start}
	ids, occurred := w.ids, w.occurred
	tx := func(fn func(exec func(string, ...any))) {
		xid, after := inTx(t, conn, fn)
		w.xids, w.bounds = append(w.xids, xid), append(w.bounds, after)
	}
	tx(func(exec func(string, ...any)) { exec(insertSQL, ids[1], "orders", "k1", w.payload1, nil, occurred) })
	tx(func(exec func(string, ...any)) {
		exec(insertSQL, ids[2], "orders", "k2", `{"n": 2}`, `{"trace": "t-2"}`, occurred)
		exec(insertSQL, ids[3], "billing", nil, `{"n": 3}`, nil, occurred.Add(time.Microsecond))
		exec(`SELECT pg_logical_emit_message(true, 'deltabus', 'mid-tx ✓')`)
		exec(insertSQL, ids[4], "orders", "k4", `[]`, `{}`, occurred.Add(-time.Second))
	})
	tx(func(exec func(string, ...any)) {
		exec(insertSQL, ids[5], "orders", "k5", `{"before": "alter"}`, nil, occurred)
		exec(`ALTER TABLE outbox ADD COLUMN tenant text`)
		exec(insertSQL, ids[6], "orders", "k6", `{"after": "alter"}`, nil, occurred)
		exec(`UPDATE outbox SET tenant = 'acme' WHERE id = $1`, ids[6])
	})
	tx(func(exec func(string, ...any)) { exec(insertSQL, ids[7], "audit", "k7", w.big, nil, occurred) })
	tx(func(exec func(string, ...any)) {
		exec(`UPDATE outbox SET type = 'OrderShipped', headers = '{"h": "v"}' WHERE id = $1`, ids[7])
		exec(`UPDATE outbox SET id = $1 WHERE id = $2`, ids[0], ids[1])
		exec(`DELETE FROM outbox WHERE id = $1`, ids[2])
	})
	tx(func(exec func(string, ...any)) { exec(`SELECT pg_logical_emit_message(true, 'deltabus', 'alone')`) })
	db.Exec(t, `SELECT pg_logical_emit_message(false, 'deltabus', 'not transactional')`)
	tx(func(exec func(string, ...any)) { exec(`TRUNCATE outbox`) })
	emitEnd(t, db)
	return w
}

// wantStream is the exact stream the workload must produce, as summaries.
func (w *realWorkload) wantStream(t *testing.T, conn *pgx.Conn) []string {
	jsonText := func(s string) string {
		var out string
		if err := conn.QueryRow(context.Background(), `SELECT $1::jsonb::text`, s).Scan(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	ids, p1 := w.ids, jsonText(w.payload1)
	ts := "2026-11-30 13:18:59.123456+05:30"
	cols8 := "id topic key type schema_version payload headers occurred_at"
	cols9 := cols8 + " tenant"
	return []string{
		"begin xid=0",
		fmt.Sprintf("insert public.outbox(%s) seq=0 new=[%s orders k1 OrderPlaced 1 %s NULL %s]", cols8, ids[1], p1, ts),
		"commit",
		"begin xid=1",
		fmt.Sprintf(`insert public.outbox(%s) seq=0 new=[%s orders k2 OrderPlaced 1 {"n": 2} {"trace": "t-2"} %s]`, cols8, ids[2], ts),
		fmt.Sprintf(`insert public.outbox(%s) seq=1 new=[%s billing NULL OrderPlaced 1 {"n": 3} NULL 2026-11-30 13:18:59.123457+05:30]`, cols8, ids[3]),
		"message transactional=true prefix=deltabus content=mid-tx ✓",
		fmt.Sprintf(`insert public.outbox(%s) seq=2 new=[%s orders k4 OrderPlaced 1 [] {} 2026-11-30 13:18:58.123456+05:30]`, cols8, ids[4]),
		"commit",
		"begin xid=2",
		fmt.Sprintf(`insert public.outbox(%s) seq=0 new=[%s orders k5 OrderPlaced 1 {"before": "alter"} NULL %s]`, cols8, ids[5], ts),
		fmt.Sprintf(`insert public.outbox(%s) seq=1 new=[%s orders k6 OrderPlaced 1 {"after": "alter"} NULL %s NULL]`, cols9, ids[6], ts),
		fmt.Sprintf(`update public.outbox(%s) seq=2 new=[%s orders k6 OrderPlaced 1 {"after": "alter"} NULL %s acme]`, cols9, ids[6], ts),
		"commit",
		"begin xid=3",
		fmt.Sprintf(`insert public.outbox(%s) seq=0 new=[%s audit k7 OrderPlaced 1 %s NULL %s NULL]`, cols9, ids[7], jsonText(w.big), ts),
		"commit",
		"begin xid=4",
		fmt.Sprintf(`update public.outbox(%s) seq=0 new=[%s audit k7 OrderShipped 1 UNCHANGED {"h": "v"} %s NULL]`, cols9, ids[7], ts),
		fmt.Sprintf(`update public.outbox(%s) seq=1 old=[%s NULL NULL NULL NULL NULL NULL NULL NULL] new=[%s orders k1 OrderPlaced 1 %s NULL %s NULL]`, cols9, ids[1], ids[0], p1, ts),
		fmt.Sprintf(`delete public.outbox(%s) seq=2 old=[%s NULL NULL NULL NULL NULL NULL NULL NULL]`, cols9, ids[2]),
		"commit",
		"begin xid=5",
		"message transactional=true prefix=deltabus content=alone",
		"commit",
		"message transactional=false prefix=deltabus content=not transactional",
		"begin xid=6",
		"truncate [public.outbox] cascade=false restart=false",
		"commit",
	}
}

func randomHex(n int) string {
	const digits = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = digits[rand.IntN(16)]
	}
	return string(b)
}
