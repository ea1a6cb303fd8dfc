package decoding

import (
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/jackc/pgx/v5"
)

var captureFlag = flag.Bool("capture", false, "rewrite testdata/*.frames.gz from a real PostgreSQL stream")

// Captured streams for benchmarks: real pgoutput messages of outbox inserts
// with ~213-byte JSON payloads, framed as in FuzzDecode and gzipped.
const (
	captureSingle = "testdata/single_row_tx.frames.gz" // 1000 one-row transactions
	captureBatch  = "testdata/batch_tx.frames.gz"      // 2 transactions of 500 rows
)

// TestCaptureStreams regenerates the benchmark captures (go test -run
// TestCaptureStreams -capture); without -capture it checks they decode.
func TestCaptureStreams(t *testing.T) {
	if !*captureFlag {
		for _, p := range []string{captureSingle, captureBatch} {
			msgs := loadFrames(t, p)
			if rows := countRows(t, msgs); rows != 1000 {
				t.Errorf("%s: %d rows, want 1000", p, rows)
			}
		}
		return
	}
	writeCapture(t, captureSingle, func(conn *pgx.Conn) {
		for i := range 1000 {
			insertOutboxRows(t, conn, i, 1)
		}
	})
	writeCapture(t, captureBatch, func(conn *pgx.Conn) {
		insertOutboxRows(t, conn, 0, 500)
		insertOutboxRows(t, conn, 500, 500)
	})
}

func writeCapture(t *testing.T, path string, workload func(*pgx.Conn)) {
	db := pgtest.NewDB(t)
	db.Exec(t, outboxDDL)
	db.Exec(t, `CREATE PUBLICATION pub FOR TABLE outbox`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	repl, slot := replSlot(t, ctx, db, "s")
	workload(db.Conn(t))
	emitEnd(t, db)
	msgs := capture(t, repl, slot, pgoutputArgs("pub"))
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(frame(msgs...)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d messages, %d rows", path, len(msgs), countRows(t, msgs))
}

// insertOutboxRows inserts n outbox rows in one transaction, with payloads
// shaped like an order event (about 213 bytes of JSON).
func insertOutboxRows(t *testing.T, conn *pgx.Conn, first, n int) {
	ctx := context.Background()
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	for i := first; i < first+n; i++ {
		payload := fmt.Sprintf(`{"order_id": "ord-%08d", "customer": {"id": %d, "tier": "gold"}, "lines": [{"sku": "SKU-%05d", "qty": %d, "price": "19.99"}], "currency": "EUR", "note": %q}`,
			i, rand.IntN(1e6), rand.IntN(1e5), 1+rand.IntN(5), strings.Repeat("x", 20+rand.IntN(20)))
		b.Queue(`INSERT INTO outbox (id, topic, key, type, payload, headers, occurred_at) VALUES (gen_random_uuid(), $1, $2, 'OrderPlaced', $3, $4, clock_timestamp())`,
			[]string{"orders", "billing", "shipping"}[i%3], fmt.Sprintf("cust-%d", i%97), payload, `{"trace_id": "abc"}`)
	}
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		t.Fatalf("insert outbox rows: %v", err)
	}
}

func loadFrames(tb testing.TB, path string) [][]byte {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatalf("open capture (regenerate with -capture): %v", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		tb.Fatal(err)
	}
	return unframe(raw)
}

func countRows(tb testing.TB, msgs [][]byte) int {
	d, rows := NewDecoder(), 0
	for _, m := range msgs {
		out, err := d.Decode(m)
		if err != nil {
			tb.Fatalf("decode capture: %v", err)
		}
		if _, ok := out.(*Row); ok {
			rows++
		}
	}
	return rows
}
