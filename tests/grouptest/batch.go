package grouptest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/deltasink"
	"github.com/deltabus/deltabus/storage"
)

// Group creates topic group name of patterns in root.
func Group(t testing.TB, root storage.Store, name string, patterns ...string) {
	t.Helper()
	if err := catalog.WriteGroup(context.Background(), root, catalog.Group{Name: name, Topics: patterns, Created: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
}

// Batch commits one batch, one event per name in topics, at source
// position pos through the Delta sink of relay appID, as the relay does:
// one commit per table, the topics of a group in one commit of its table
// with a txn each. It returns the events' tables.
func Batch(t testing.TB, root storage.Store, appID string, pos int64, topics ...string) []string {
	t.Helper()
	evs := make([]*outbox.Event, len(topics))
	for i, name := range topics {
		evs[i] = Event(name, pos, i, `{}`)
	}
	return Commit(t, root, appID, pos, evs...)
}

// Commit is Batch of the events evs.
func Commit(t testing.TB, root storage.Store, appID string, pos int64, evs ...*outbox.Event) []string {
	t.Helper()
	ctx := context.Background()
	s := deltasink.New(root, deltasink.Options{AppID: appID, SyncCheckpoints: true})
	b := s.NewBatch()
	var tables []string
	seen := map[string]bool{}
	for _, ev := range evs {
		tp, err := s.Open(ctx, ev.Topic)
		if err != nil {
			t.Fatal(err)
		}
		if !seen[tp.Table] {
			seen[tp.Table] = true
			tables = append(tables, tp.Table)
		}
		if err := b.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	for _, table := range tables {
		if _, err := b.Commit(ctx, table, pos); err != nil {
			t.Fatalf("commit %s at %d: %v", table, pos, err)
		}
	}
	return tables
}

// Event is the i-th event of topic in the source transaction at pos.
func Event(topic string, pos int64, i int, payload string) *outbox.Event {
	at := time.Unix(1700000000, 0).UTC()
	return &outbox.Event{ID: fmt.Sprintf("00000000-0000-4000-8000-%06d%06d", pos%1000000, i), Topic: topic, Key: "k", Type: "t",
		SchemaVersion: 1, Payload: payload, OccurredAt: at, CommitLSN: pos, Seq: int32(i), CommitTime: at}
}
