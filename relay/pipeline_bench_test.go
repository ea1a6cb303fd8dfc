package relay

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgproto3"

	pg "github.com/deltabus/deltabus/decoding/pgoutputtest"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pii"
	"github.com/deltabus/deltabus/sink"
	"github.com/deltabus/deltabus/sink/deltasink"
	"github.com/deltabus/deltabus/storage"
)

// playConn plays prepared XLogData frames, then blocks; it records the
// acknowledged position.
type playConn struct {
	frames [][]byte
	next   int
	mu     sync.Mutex
	acked  pglogrepl.LSN
	ackC   chan struct{}
	want   pglogrepl.LSN
}

func (c *playConn) Receive(ctx context.Context, until time.Time) (pgproto3.BackendMessage, error) {
	if c.next < len(c.frames) {
		c.next++
		return &pgproto3.CopyData{Data: c.frames[c.next-1]}, nil
	}
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		return nil, nil
	}
}

// Wake: a benchmark stops by its context.
func (c *playConn) Wake() {}

func (c *playConn) SendStatus(_ context.Context, _, flush pglogrepl.LSN, _ bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if flush > c.acked {
		c.acked = flush
		if flush >= c.want && c.ackC != nil {
			close(c.ackC)
			c.ackC = nil
		}
	}
	return nil
}

func (c *playConn) Close(context.Context) error { return nil }

// benchPayload is a ~213-byte order event, like `relay bench`'s.
const benchPayload = `{"order_id": 123456, "customer": "customer-4242", "amount": 12.5, "currency": "EUR", "lines": [{"sku": "sku-77", "qty": 3}], "note": "a realistic order created event with some padding text"}`

// streamFrames builds txs transactions of rows rows each over 5 topics.
func streamFrames(txs, rows int) ([][]byte, pglogrepl.LSN) {
	return framesOf(txs, rows, func(int) string { return benchPayload })
}

// framesOf is streamFrames with payload(n) as the n-th event's payload.
func framesOf(txs, rows int, payload func(n int) string) ([][]byte, pglogrepl.LSN) {
	topics := []string{"orders", "payments", "tenants", "ingestion", "quality"}
	var frames [][]byte
	lsn := pglogrepl.LSN(0x1000)
	send := func(m []byte) {
		lsn += 0x100
		frames = append(frames, pg.XLogData(lsn, m))
	}
	send(pg.Relation(1, "public", "outbox", pg.OutboxColumns()))
	n, now := 0, time.Now()
	for x := range txs {
		commit := lsn + pglogrepl.LSN(0x100*(rows+2))
		send(pg.Begin(commit, now, uint32(1000+x)))
		for range rows {
			n++
			id := fmt.Sprintf("00000000-0000-4000-8000-%012d", n)
			send(pg.Insert(1, pg.OutboxTuple(id, topics[n%len(topics)], payload(n))...))
		}
		lsn = commit - 0x100
		send(pg.Commit(commit, commit+0x10, now))
	}
	return frames, lsn + 0x10
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPipeline plays a replication stream through a session into
// Delta tables on local disk (no network, no PostgreSQL): the relay's own
// CPU per event, for profiling (-cpuprofile) and instruction counts.
func BenchmarkPipeline(b *testing.B) {
	TuneRuntime()
	for _, c := range []struct {
		name      string
		txs, rows int
	}{{"single_row_tx", 20_000, 1}, {"1000row_tx", 20, 1000}} {
		b.Run(c.name, func(b *testing.B) {
			frames, end := streamFrames(c.txs, c.rows)
			events := c.txs * c.rows
			b.ReportAllocs()
			var cpu time.Duration
			for b.Loop() {
				cpu += playPipeline(b, frames, end)
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(events*b.N), "cpu-us/event")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func playPipeline(b *testing.B, frames [][]byte, end pglogrepl.LSN) time.Duration {
	return playPipelineWith(b, frames, end, nil)
}

// playPipelineWith is playPipeline with a Protector (nil: none).
func playPipelineWith(b *testing.B, frames [][]byte, end pglogrepl.LSN, p *pii.Protector) time.Duration {
	store, err := storage.NewLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	snk := deltasink.New(store, deltasink.Options{AppID: "deltabus-bench", Logger: log})
	cfg := Config{Source: "postgres://u@127.0.0.1/db", Store: "file:///x"}
	r := New(cfg, store, func(string) sink.Sink { return snk }, outbox.Mappings{}, log, nil)
	r.Protector = p
	conn := &playConn{frames: frames, ackC: make(chan struct{}), want: end}
	done := conn.ackC
	ctx, stop := context.WithCancel(context.Background())
	hard, cancel := afterStop(ctx, r.cfg.ShutdownTimeout)
	defer cancel()
	errc := make(chan error, 1)
	began := cpuTime()
	go func() { errc <- r.serve(ctx, hard, conn, 0x1000) }()
	select {
	case <-done:
	case err := <-errc:
		b.Fatalf("session ended: %v", err)
	}
	stop()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	return cpuTime() - began
}
