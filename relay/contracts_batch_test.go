package relay

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/contract"
	"github.com/deltabus/deltabus/contract/compat"
	"github.com/deltabus/deltabus/sink/sinktest"
)

// TestHoldInsideABatchKeepsTheRefusedEvent: a valid transaction of a topic
// that holds on violations and the refused one fall into one batch (a
// batch delay, a busy committer, pacing that carries the topic's rows
// into the next batch, a group's table). The topic's commit of that batch
// must record a position below the hold, not the batch's: once the
// version is registered, the rewind delivers the refused event and every
// later one of the topic, none twice.
func TestHoldInsideABatchKeepsTheRefusedEvent(t *testing.T) {
	for _, c := range []struct {
		name  string
		group bool
		tweak func(*Config)
	}{
		{"OneBatch", false, func(c *Config) { c.BatchMaxDelay = 300 * time.Millisecond }},
		{"Carried", false, func(c *Config) { c.TopicCommitInterval = time.Hour }},
		{"GroupTable", true, func(c *Config) { c.BatchMaxDelay = 300 * time.Millisecond }},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := sinktest.NewMemory()
			if c.group {
				mem.Group("_group.m", "orders", "payments")
			}
			h := contractHarnessWith(t, mem, contract.Policy{OnViolation: contract.Hold}, c.tweak)
			_, e0 := h.src.txRows(row{"orders", "OrderPlaced", 1, `{"order_id": 0}`})
			h.waitAck(e0)
			h.src.txRows(row{"orders", "OrderPlaced", 1, `{"order_id": 1}`})
			c2, _ := h.src.txRows(row{"orders", "OrderPlaced", 2, `{"order_id": 2, "note": "v2"}`}, row{"payments", "Paid", 1, `{}`})
			_, e3 := h.src.txRows(row{"orders", "OrderPlaced", 1, `{"order_id": 3}`}, row{"payments", "Paid", 1, `{}`})
			waitRows(t, mem, "payments", 2)
			if got := h.conn.ack(); got > c2 {
				t.Fatalf("acknowledged %s past the hold at %s", got, c2)
			}
			ctx := context.Background()
			if _, err := contract.NewRegistry(h.store, nil).Register(ctx, contract.Registration{Topic: "orders", Type: "OrderPlaced", Version: 2,
				Schema: []byte(placedV2), Mode: compat.None}); err != nil {
				t.Fatal(err)
			}
			if err := h.ended(5 * time.Second); !errors.Is(err, errRewind) {
				t.Fatalf("after the registration the session ended with %v, want a rewind", err)
			}
			next := h.resume(h.conn.ack())
			next.waitAck(e3)
			sent := h.src.sent["orders"]
			rows := waitRows(t, mem, "orders", len(sent))
			if got := ids(rows); strings.Join(got, ",") != strings.Join(sent, ",") {
				t.Fatalf("orders holds %d of %d events sent: %v, want %v", len(got), len(sent), got, sent)
			}
			if n := len(mem.Rows("payments")); n != 2 {
				t.Fatalf("payments has %d rows after the rewind, want 2 (no duplicate)", n)
			}
		})
	}
}

// contractHarnessWith is contractHarness with the relay's configuration
// tweaked.
func contractHarnessWith(t *testing.T, mem *sinktest.Memory, policy contract.Policy, tweak func(*Config)) *harness {
	t.Helper()
	return newHarnessWith(t, mem, 0x1000, tweak, func(r *Relay) {
		ctx := context.Background()
		reg := contract.NewRegistry(r.store, nil)
		if _, err := reg.Register(ctx, contract.Registration{Topic: "orders", Type: "OrderPlaced", Version: 1, Schema: []byte(placedV1), Mode: compat.None}); err != nil {
			t.Fatal(err)
		}
		if err := reg.SetPolicy(ctx, "orders", policy); err != nil {
			t.Fatal(err)
		}
		r.Contracts = contract.New(r.store, contract.Options{Poll: 10 * time.Millisecond})
		go r.Contracts.Run(t.Context())
	})
}
