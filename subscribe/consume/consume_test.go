package consume

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/subscribe"
)

// TestWriteLineNestsPayloadAndHeaders: payload and headers are JSON values
// in the line, not JSON-encoded strings; text that is not JSON stays a
// string; absent headers are null.
func TestWriteLineNestsPayloadAndHeaders(t *testing.T) {
	h := `{"traceparent":"00-ab","tags":["a"]}`
	at := time.Date(2026, 11, 30, 8, 0, 0, 123456000, time.UTC)
	evs := []subscribe.Event{
		{Event: outbox.Event{ID: "e1", Topic: "orders", Key: "k", Type: "Placed", SchemaVersion: 2, Payload: `{"amount": 9.5, "items": [1,2]}`,
			Headers: &h, OccurredAt: at, CommitLSN: 23, Seq: 1, Xid: 7, CommitTime: at}, Position: subscribe.Position{Version: 4, Offset: 9}},
		{Event: outbox.Event{ID: "e2", Payload: `not json`, CommitTime: at}},
	}
	var buf bytes.Buffer
	for i := range evs {
		if err := WriteLine(&buf, &evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("%d lines", len(lines))
	}
	var first map[string]any
	if err := json.Unmarshal(lines[0], &first); err != nil {
		t.Fatal(err)
	}
	payload, ok := first["payload"].(map[string]any)
	headers, ok2 := first["headers"].(map[string]any)
	if !ok || !ok2 || payload["amount"] != 9.5 || headers["traceparent"] != "00-ab" || first["schema_version"] != 2.0 ||
		first["version"] != 4.0 || first["offset"] != 9.0 || first["occurred_at"] != "2026-11-30T08:00:00.123456Z" || first["commit_lsn"] != 23.0 {
		t.Fatalf("line %s", lines[0])
	}
	var second map[string]any
	if err := json.Unmarshal(lines[1], &second); err != nil {
		t.Fatal(err)
	}
	if second["payload"] != "not json" || second["headers"] != nil {
		t.Fatalf("line %s", lines[1])
	}
}
