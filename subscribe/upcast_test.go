package subscribe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestUpcastersConvertOlderEvents: a handler reading version 3 of a type
// gets every event at version 3, converted step by step from the version
// its producer wrote (WriterVersion), in order and nothing else changed.
func TestUpcastersConvertOlderEvents(t *testing.T) {
	root := localRoot(t)
	tt := newTestTopic(t, root, "orders")
	tt.commit(10, 4) // versions 1 and 2 alternate
	u := NewUpcasters().Want("Happened", 3).
		Register("Happened", 1, func(p json.RawMessage) (json.RawMessage, error) {
			var v map[string]any
			if err := json.Unmarshal(p, &v); err != nil {
				return nil, err
			}
			v["from"] = 1
			return json.Marshal(v)
		}).
		Register("Happened", 2, func(p json.RawMessage) (json.RawMessage, error) {
			var v map[string]any
			if err := json.Unmarshal(p, &v); err != nil {
				return nil, err
			}
			v["count"], v["n"] = v["n"], nil
			delete(v, "n")
			return json.Marshal(v)
		})
	var c collector
	if err := Subscribe(context.Background(), root, "orders", "g", c.handle, Options{BatchSize: 3, Upcasters: u}); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, c.events, 10)
	for i, e := range c.events {
		n := i + 1
		want := fmt.Sprintf(`{"count":%d}`, n)
		if e.WriterVersion == 1 {
			want = fmt.Sprintf(`{"count":%d,"from":1}`, n)
		}
		if e.SchemaVersion != 3 || e.WriterVersion != int32(1+n%2) || e.Payload != want {
			t.Errorf("event %d: version %d, writer %d, payload %s; want 3, %d, %s", n, e.SchemaVersion, e.WriterVersion, e.Payload, 1+n%2, want)
		}
	}
}

// TestUpcastersRefuseWhatTheyCannotConvert: an event newer than the
// version the handler reads stops the subscription before its batch
// (unless PassNewer), as does a missing step or a failing upcaster; the
// checkpoint stays before the batch.
func TestUpcastersRefuseWhatTheyCannotConvert(t *testing.T) {
	ctx := context.Background()
	root := localRoot(t)
	tt := newTestTopic(t, root, "orders")
	tt.commit(4, 4)
	var c collector
	err := Subscribe(ctx, root, "orders", "newer", c.handle, Options{Upcasters: NewUpcasters().Want("Happened", 1)})
	var ne *NewerVersionError
	if !errors.As(err, &ne) || ne.Version != 2 || ne.Want != 1 || len(c.events) != 0 {
		t.Fatalf("newer event: %v (%d events handled)", err, len(c.events))
	}
	if _, ok, _ := NewStoreCheckpoints(root).Load(ctx, "newer", "orders"); ok {
		t.Fatal("the checkpoint moved past a refused batch")
	}
	c = collector{}
	if err := Subscribe(ctx, root, "orders", "pass", c.handle, Options{Upcasters: &Upcasters{types: NewUpcasters().Want("Happened", 1).types, PassNewer: true}}); err != nil || len(c.events) != 4 {
		t.Fatalf("PassNewer: %v, %d events", err, len(c.events))
	}
	for i, e := range c.events {
		if e.SchemaVersion != e.WriterVersion {
			t.Errorf("passed event %d converted: %+v", i, e)
		}
	}
	err = Subscribe(ctx, root, "orders", "gap", c.handle, Options{Upcasters: NewUpcasters().Want("Happened", 3).Register("Happened", 1, func(p json.RawMessage) (json.RawMessage, error) { return p, nil })})
	if err == nil || !strings.Contains(err.Error(), "no upcaster turns version 2 into 3") {
		t.Fatalf("missing step: %v", err)
	}
	err = Subscribe(ctx, root, "orders", "fail", c.handle, Options{Upcasters: NewUpcasters().Want("Happened", 2).Register("Happened", 1, func(json.RawMessage) (json.RawMessage, error) { return nil, errors.New("boom") })})
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("failing upcaster: %v", err)
	}
	if err := Subscribe(ctx, root, "orders", "cols", c.handle, Options{Columns: true, Upcasters: NewUpcasters().Want("Happened", 2)}); !errors.Is(err, errUpcastColumns) {
		t.Fatalf("Columns with Upcasters: %v", err)
	}
}
