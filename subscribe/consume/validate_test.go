package consume

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/contract"
	"github.com/deltabus/deltabus/contract/compat"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// writeTopic commits one version of a topic table holding the events.
func writeTopic(t *testing.T, root storage.Store, name string, evs []outbox.Event) {
	t.Helper()
	ctx := context.Background()
	st := storage.Sub(root, name)
	meta, proto := topic.NewTableMetadata(name)
	if err := delta.CreateTable(ctx, st, meta, proto, nil); err != nil {
		t.Fatal(err)
	}
	tbl, err := delta.OpenTable(ctx, st, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := topic.NewFileWriter(st, topic.FileOptions{})
	for i := range evs {
		if err := w.Append(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	adds, err := w.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, delta.CommitActions{Adds: adds, Txn: &delta.Txn{AppID: "test", Version: 100}}); err != nil {
		t.Fatal(err)
	}
}

// TestValidateMarksWhatItPrints: --validate prints every event, marks
// those their contract refuses, and ends with a ViolationsError counting
// them.
func TestValidateMarksWhatItPrints(t *testing.T) {
	ctx := context.Background()
	root, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := contract.NewRegistry(root, nil).Register(ctx, contract.Registration{Topic: "orders", Type: "Placed", Version: 1,
		Schema: []byte(`{"type":"object","required":["id"],"properties":{"id":{"type":"integer"}}}`), Mode: compat.None}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	var evs []outbox.Event
	for i, p := range []struct {
		version int32
		payload string
	}{{1, `{"id": 1}`}, {1, `{"id": "x"}`}, {2, `{"id": 3}`}, {1, `{"id": 4}`}} {
		evs = append(evs, outbox.Event{ID: fmt.Sprintf("00000000-0000-0000-0000-%012d", i), Topic: "orders", Key: "k", Type: "Placed",
			SchemaVersion: p.version, Payload: p.payload, OccurredAt: now, CommitLSN: 100, Seq: int32(i), Xid: 1, CommitTime: now})
	}
	writeTopic(t, root, "orders", evs)
	var out bytes.Buffer
	err = Run(ctx, Config{Store: root, Topic: "orders", Group: "g", Contracts: contract.New(root, contract.Options{})}, &out)
	var ve *ViolationsError
	if !errors.As(err, &ve) || ve.Count != 2 || !strings.Contains(ve.First, `at "/id"`) {
		t.Fatalf("Run = %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines printed", len(lines))
	}
	for i, want := range []string{"", `got string, want integer`, `no contract version 2`, ""} {
		var l struct {
			Violation string `json:"contract_violation"`
		}
		if err := json.Unmarshal([]byte(lines[i]), &l); err != nil {
			t.Fatal(err)
		}
		if want == "" && l.Violation != "" || !strings.Contains(l.Violation, want) {
			t.Errorf("line %d: violation %q, want %q", i, l.Violation, want)
		}
	}
}
