package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/contract"
	"github.com/deltabus/deltabus/contract/compat"
	pg "github.com/deltabus/deltabus/decoding/pgoutputtest"
	"github.com/deltabus/deltabus/sink/sinktest"
	"github.com/deltabus/deltabus/storage"
)

const (
	placedV1 = `{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"integer"}}}`
	placedV2 = `{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"integer"},"note":{"type":"string"}}}`
)

// row is one outbox row of a test transaction.
type row struct {
	topic, typ string
	version    int
	payload    string
}

// txRows commits one transaction of the given rows.
func (s *source) txRows(rows ...row) (commit, end pglogrepl.LSN) {
	if !s.rel {
		s.send(pg.Relation(1, "public", "outbox", pg.OutboxColumns()))
		s.rel = true
	}
	s.xid++
	commit = s.lsn + pglogrepl.LSN(0x100*(len(rows)+2))
	first := len(s.log)
	defer func() {
		for i := first; i < len(s.log); i++ {
			s.log[i].end = end
		}
	}()
	s.send(pg.Begin(commit, time.Now(), s.xid))
	for _, r := range rows {
		s.n++
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", s.n)
		s.sent[r.topic] = append(s.sent[r.topic], id)
		s.send(pg.Insert(1, pg.Text(id), pg.Text(r.topic), pg.Text("k"), pg.Text(r.typ), pg.Text(fmt.Sprint(r.version)),
			pg.Text(r.payload), pg.Null, pg.Text("2026-11-30 07:48:59.123456+00")))
	}
	s.lsn = commit - 0x100
	s.send(pg.Commit(commit, commit+0x10, time.Now()))
	return commit, commit + 0x10
}

// replay plays to c, a new session's connection, the relation and every
// transaction that ends after from: what PostgreSQL sends again from a
// slot confirmed at from.
func (s *source) replay(c *fakeConn, from pglogrepl.LSN) {
	c.frames <- pg.XLogData(from, pg.Relation(1, "public", "outbox", pg.OutboxColumns()))
	for _, f := range s.log {
		if f.end > from || f.end == 0 && f.lsn > from {
			c.frames <- f.frame
		}
	}
}

// contractHarness is a harness whose relay checks contracts registered in
// its store: placed v1 for orders/OrderPlaced, and the given policy.
func contractHarness(t *testing.T, mem *sinktest.Memory, policy contract.Policy) *harness {
	t.Helper()
	return contractHarnessWith(t, mem, policy, nil)
}

func waitRows(t *testing.T, mem *sinktest.Memory, topic string, n int) []sinktest.Row {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		rows := mem.Rows(topic)
		if len(rows) >= n {
			return rows
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d rows, want %d", topic, len(rows), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestContractViolationsAreDeadLettered: an invalid event and an
// unregistered version of a type with contracts go to _dead_letter with
// reasons naming the contract, the version and the first failing pointer;
// valid events and types without contracts reach the topic, in order.
func TestContractViolationsAreDeadLettered(t *testing.T) {
	mem := sinktest.NewMemory()
	h := contractHarness(t, mem, contract.Policy{})
	_, end := h.src.txRows(
		row{"orders", "OrderPlaced", 1, `{"order_id": 1}`},
		row{"orders", "OrderPlaced", 1, `{"order_id": "two"}`},
		row{"orders", "OrderPlaced", 2, `{"order_id": 3}`},
		row{"orders", "Uncontracted", 7, `[1]`},
		row{"orders", "OrderPlaced", 1, `{"order_id": 5}`})
	h.waitAck(end)
	sent := h.src.sent["orders"]
	if got := ids(mem.Rows("orders")); strings.Join(got, ",") != strings.Join([]string{sent[0], sent[3], sent[4]}, ",") {
		t.Fatalf("orders holds %v", got)
	}
	dl := mem.Rows("_dead_letter")
	if len(dl) != 2 || dl[0].ID != sent[1] || dl[1].ID != sent[2] {
		t.Fatalf("dead letters %+v", dl)
	}
	for i, want := range []string{`contract orders/OrderPlaced v1 at "/order_id": type: got string, want integer`, `has no contract version 2 (registered: 1)`} {
		if !strings.Contains(dl[i].Reason, want) {
			t.Errorf("dead letter %d: reason %q, want %q", i, dl[i].Reason, want)
		}
	}
}

// TestStrictTopicRefusesTypesWithoutContracts.
func TestStrictTopicRefusesTypesWithoutContracts(t *testing.T) {
	mem := sinktest.NewMemory()
	h := contractHarness(t, mem, contract.Policy{Strict: true})
	_, end := h.src.txRows(row{"orders", "Uncontracted", 1, `{}`}, row{"payments", "Uncontracted", 1, `{}`})
	h.waitAck(end)
	if dl := mem.Rows("_dead_letter"); len(dl) != 1 || !strings.Contains(dl[0].Reason, `topic "orders" is strict`) {
		t.Fatalf("dead letters %+v", dl)
	}
	if n := len(mem.Rows("payments")); n != 1 {
		t.Fatalf("payments (not strict) has %d rows", n)
	}
}

// TestHoldOnViolationThenResume: a topic that holds on violations keeps
// the slot before its refused event while the others stream; `relay
// status`'s state says why; registering the version the event names lifts
// the hold, the session rewinds, and the next one delivers the topic's
// events from the hold on, once each.
func TestHoldOnViolationThenResume(t *testing.T) {
	mem := sinktest.NewMemory()
	h := contractHarness(t, mem, contract.Policy{OnViolation: contract.Hold})
	_, e1 := h.src.txRows(row{"orders", "OrderPlaced", 1, `{"order_id": 1}`})
	h.waitAck(e1)
	c2, _ := h.src.txRows(row{"orders", "OrderPlaced", 2, `{"order_id": 2, "note": "v2"}`}, row{"payments", "Paid", 1, `{}`})
	_, e3 := h.src.txRows(row{"orders", "OrderPlaced", 1, `{"order_id": 3}`}, row{"payments", "Paid", 1, `{}`})
	waitRows(t, mem, "payments", 2)
	time.Sleep(50 * time.Millisecond)
	if n := len(mem.Rows("orders")); n != 1 {
		t.Fatalf("orders has %d rows while held", n)
	}
	if got := h.conn.ack(); got > c2 {
		t.Fatalf("acknowledged %s past the hold at %s", got, c2)
	}
	ctx := context.Background()
	st, _, _ := catalog.ReadRebuildState(ctx, h.store, h.r.id.AppID, "orders")
	if st.Paused != catalog.HoldContract || st.PausedAtLSN() != c2 || !strings.Contains(st.Last, "no contract version 2") {
		t.Fatalf("state %+v", st)
	}
	select {
	case err := <-h.errc:
		t.Fatalf("the session ended while held: %v", err)
	default:
	}

	if _, err := contract.NewRegistry(h.store, nil).Register(ctx, contract.Registration{Topic: "orders", Type: "OrderPlaced", Version: 2,
		Schema: []byte(placedV2), Mode: compat.None}); err != nil {
		t.Fatal(err)
	}
	if err := h.ended(5 * time.Second); !errors.Is(err, errRewind) {
		t.Fatalf("after the fix the session ended with %v, want a rewind", err)
	}
	if st, _, _ := catalog.ReadRebuildState(ctx, h.store, h.r.id.AppID, "orders"); st.Paused != "" || !strings.Contains(st.Last, "resumed") {
		t.Fatalf("state after the fix %+v", st)
	}
	next := h.resume(h.conn.ack())
	next.waitAck(e3)
	sent := h.src.sent["orders"]
	if got := ids(mem.Rows("orders")); strings.Join(got, ",") != strings.Join(sent, ",") {
		t.Fatalf("orders holds %v, want %v", got, sent)
	}
	if n := len(mem.Rows("payments")); n != 2 {
		t.Fatalf("payments has %d rows after the rewind, want 2 (no duplicate)", n)
	}
}

// TestHoldStartsAtItsTransaction: an event refused after rows of the same
// transaction and topic: those rows must not commit without the rest, so
// the session rewinds and the next one holds the topic from that
// transaction's first row.
func TestHoldStartsAtItsTransaction(t *testing.T) {
	mem := sinktest.NewMemory()
	h := contractHarness(t, mem, contract.Policy{OnViolation: contract.Hold})
	_, e1 := h.src.txRows(row{"orders", "OrderPlaced", 1, `{"order_id": 1}`})
	h.waitAck(e1)
	c2, _ := h.src.txRows(row{"orders", "OrderPlaced", 1, `{"order_id": 2}`}, row{"orders", "OrderPlaced", 1, `{"order_id": false}`})
	if err := h.ended(5 * time.Second); !errors.Is(err, errRewind) {
		t.Fatalf("session ended with %v, want a rewind", err)
	}
	next := h.resume(h.conn.ack())
	_, e3 := next.src.txRows(row{"payments", "Paid", 1, `{}`})
	waitRows(t, mem, "payments", 1)
	if got := next.conn.ack(); got > c2 || got >= e3 {
		t.Fatalf("acknowledged %s past the hold at %s", got, c2)
	}
	if n := len(mem.Rows("orders")); n != 1 {
		t.Fatalf("orders has %d rows, want 1: its held transaction was split", n)
	}
	if st, _, _ := catalog.ReadRebuildState(context.Background(), h.store, h.r.id.AppID, "orders"); st.PausedAtLSN() != c2 {
		t.Fatalf("state %+v, want held at %s", st, c2)
	}
}

// resume starts a new session of the same relay (what Run does after a
// rewind), replaying the stream from the acknowledged position.
func (h *harness) resume(from pglogrepl.LSN) *harness {
	h.t.Helper()
	next := &harness{t: h.t, r: h.r, mem: h.mem, conn: newFakeConn(), store: h.store, errc: make(chan error, 1)}
	next.src = h.src
	h.src.c = next.conn
	h.src.replay(next.conn, from)
	ctx, stop := context.WithCancel(context.Background())
	hard, cancel := afterStop(ctx, h.r.cfg.ShutdownTimeout)
	next.stop, next.hard = stop, cancel
	go func() { next.errc <- h.r.serve(ctx, hard, next.conn, from) }()
	h.t.Cleanup(func() { stop(); cancel() })
	return next
}

var _ storage.Store = (*storage.Local)(nil)
