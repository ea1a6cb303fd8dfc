package relay

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgproto3"

	pg "github.com/deltabus/deltabus/decoding/pgoutputtest"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink"
	"github.com/deltabus/deltabus/sink/sinktest"
	"github.com/deltabus/deltabus/storage"
)

// fakeConn plays a replication stream to a session and records the
// positions it acknowledges.
type fakeConn struct {
	frames chan []byte
	wake   chan struct{}

	mu      sync.Mutex
	flushed pglogrepl.LSN
	acks    int
	asked   int // status updates that requested a reply
	// answer, when set, is called for every status update that requests
	// a reply: a test's server answers it (or not).
	answer func()
}

func newFakeConn() *fakeConn {
	return &fakeConn{frames: make(chan []byte, 1024), wake: make(chan struct{}, 1)}
}

func (c *fakeConn) Wake() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *fakeConn) Receive(ctx context.Context, until time.Time) (pgproto3.BackendMessage, error) {
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	select {
	case f := <-c.frames:
		return &pgproto3.CopyData{Data: f}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.wake:
		return nil, nil
	case <-t.C:
		return nil, nil
	}
}

func (c *fakeConn) SendStatus(_ context.Context, _, flush pglogrepl.LSN, reply bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushed = flush
	c.acks++
	if reply {
		c.asked++
		if c.answer != nil {
			c.answer()
		}
	}
	return nil
}

func (c *fakeConn) Close(context.Context) error { return nil }

func (c *fakeConn) ack() pglogrepl.LSN {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.flushed
}

// source writes transactions as pgoutput frames: one relation (id 1, the
// outbox), LSNs growing by 0x100 per message.
type source struct {
	c    *fakeConn
	lsn  pglogrepl.LSN
	xid  uint32
	n    int
	rel  bool
	sent map[string][]string // topic -> event ids, in commit order
	log  []sentFrame         // every frame sent but the relation, for replay
	// committedAt, if set, is the commit time of the transactions tx
	// writes (default: now).
	committedAt time.Time
}

func newSource(c *fakeConn, from pglogrepl.LSN) *source {
	return &source{c: c, lsn: from, xid: 1000, sent: map[string][]string{}}
}

// sentFrame is a frame as sent, with its position.
type sentFrame struct {
	lsn   pglogrepl.LSN
	end   pglogrepl.LSN // the end of its transaction, when known
	frame []byte
}

func (s *source) send(msg []byte) pglogrepl.LSN {
	s.lsn += 0x100
	f := pg.XLogData(s.lsn, msg)
	s.c.frames <- f
	if s.rel {
		s.log = append(s.log, sentFrame{lsn: s.lsn, frame: f})
	}
	return s.lsn
}

// tx commits one transaction with an event per topic given; it returns the
// transaction's commit and end LSNs.
func (s *source) tx(topics ...string) (commit, end pglogrepl.LSN) {
	if !s.rel {
		s.send(pg.Relation(1, "public", "outbox", pg.OutboxColumns()))
		s.rel = true
	}
	s.xid++
	commit = s.lsn + pglogrepl.LSN(0x100*(len(topics)+2))
	s.send(pg.Begin(commit, time.Now(), s.xid))
	for _, t := range topics {
		s.n++
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", s.n)
		s.sent[t] = append(s.sent[t], id)
		s.send(pg.Insert(1, pg.OutboxTuple(id, t, `{"n":1}`)...))
	}
	s.lsn = commit - 0x100
	at := s.committedAt
	if at.IsZero() {
		at = time.Now()
	}
	s.send(pg.Commit(commit, commit+0x10, at))
	return commit, commit + 0x10
}

// message emits a transactional logical message in its own transaction.
func (s *source) message(prefix, content string) pglogrepl.LSN {
	s.xid++
	begin := s.lsn + 0x100
	commit, at := begin+0x200, begin+0x100
	s.send(pg.Begin(commit, time.Now(), s.xid))
	s.send(pg.Message(true, at, prefix, []byte(content)))
	s.send(pg.Commit(commit, commit+0x10, time.Now()))
	return at
}

type harness struct {
	t     *testing.T
	r     *Relay
	mem   *sinktest.Memory
	conn  *fakeConn
	src   *source
	store storage.Store
	errc  chan error
	stop  context.CancelFunc // graceful stop
	hard  context.CancelFunc
}

func newHarness(t *testing.T, mem *sinktest.Memory, start pglogrepl.LSN, tweak func(*Config)) *harness {
	t.Helper()
	return newHarnessWith(t, mem, start, tweak, nil)
}

// newHarnessWith is newHarness with a last change to the relay (setR)
// before it streams.
func newHarnessWith(t *testing.T, mem *sinktest.Memory, start pglogrepl.LSN, tweak func(*Config), setR func(*Relay)) *harness {
	t.Helper()
	store, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Source: "postgres://u@127.0.0.1/db", Store: "file:///x", BatchMaxDelay: 5 * time.Millisecond,
		StatusInterval: 20 * time.Millisecond, ShutdownTimeout: 2 * time.Second}
	if tweak != nil {
		tweak(&cfg)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	h := &harness{t: t, mem: mem, conn: newFakeConn(), store: store, errc: make(chan error, 1)}
	h.r = New(cfg, store, func(string) sink.Sink { return mem }, outbox.Mappings{}, log, nil)
	if setR != nil {
		setR(h.r)
	}
	h.src = newSource(h.conn, start)
	ctx, stop := context.WithCancel(context.Background())
	hard, cancel := afterStop(ctx, h.r.cfg.ShutdownTimeout)
	h.stop, h.hard = stop, cancel
	go func() { h.errc <- h.r.serve(ctx, hard, h.conn, start) }()
	t.Cleanup(func() { stop(); cancel() })
	<-h.r.Started()
	return h
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// waitAck waits until the session acknowledged at least lsn.
func (h *harness) waitAck(lsn pglogrepl.LSN) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for h.conn.ack() < lsn {
		if time.Now().After(deadline) {
			h.t.Fatalf("acknowledged %s, want at least %s", h.conn.ack(), lsn)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// ended waits for serve to return and returns its error.
func (h *harness) ended(within time.Duration) error {
	h.t.Helper()
	select {
	case err := <-h.errc:
		return err
	case <-time.After(within):
		h.t.Fatalf("the session did not end within %s", within)
		return nil
	}
}

func ids(rows []sinktest.Row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.ID)
	}
	return out
}
