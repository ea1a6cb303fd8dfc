// Package memberstest is the conformance suite every members.Source
// passes: Groups in process, serve.Client over HTTP. It writes its own
// topic tables, as the relay does, into the store the source serves.
package memberstest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// Topic writes a topic table the way the relay does: version 0 creates
// it, every later version is one commit of events in commit order. It
// remembers the order it wrote: Order is the topic's commit order.
type Topic struct {
	t    testing.TB
	root storage.Store
	Name string
	mu   sync.Mutex
	tbl  *delta.Table
	lsn  int64
	// Order lists the event ids in the order committed.
	Order []string
	// Keys maps an event id to its key.
	Keys map[string]string
}

// NewTopic creates topic name in root.
func NewTopic(t testing.TB, root storage.Store, name string) *Topic {
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
	return &Topic{t: t, root: root, Name: name, tbl: tbl, lsn: 1000, Keys: map[string]string{}}
}

// Event is one event to commit.
type Event struct {
	ID, Key, Type string
	Version       int32
	Payload       string
}

// Commit commits the events as one version and returns it.
func (tt *Topic) Commit(evs ...Event) int64 {
	tt.t.Helper()
	tt.mu.Lock()
	defer tt.mu.Unlock()
	ctx := context.Background()
	w := topic.NewFileWriter(storage.Sub(tt.root, tt.Name), topic.FileOptions{Source: "deltabus-test"})
	now := time.Now().UTC().Truncate(time.Microsecond)
	tt.lsn += 100
	for i, e := range evs {
		if e.Type == "" {
			e.Type = "Happened"
		}
		if e.Version == 0 {
			e.Version = 1
		}
		if e.Payload == "" {
			e.Payload = fmt.Sprintf(`{"id":%q}`, e.ID)
		}
		ev := &outbox.Event{ID: e.ID, Topic: tt.Name, Key: e.Key, Type: e.Type, SchemaVersion: e.Version, Payload: e.Payload,
			OccurredAt: now, CommitLSN: tt.lsn, Seq: int32(i), Xid: tt.lsn / 100, CommitTime: now}
		if err := w.Append(ev); err != nil {
			tt.t.Fatal(err)
		}
		tt.Order = append(tt.Order, e.ID)
		tt.Keys[e.ID] = e.Key
	}
	adds, err := w.Close(ctx)
	if err != nil {
		tt.t.Fatal(err)
	}
	v, err := tt.tbl.Commit(ctx, delta.CommitActions{Adds: adds, Txn: &delta.Txn{AppID: "deltabus-test", Version: tt.lsn}})
	if err != nil {
		tt.t.Fatal(err)
	}
	return v
}

// CommitKeyed commits n events over keys k0..k(keys-1), in turn, and
// returns their ids.
func (tt *Topic) CommitKeyed(n, keys int) []string {
	tt.t.Helper()
	evs := make([]Event, n)
	ids := make([]string, n)
	for i := range evs {
		ids[i] = uuid.NewString()
		evs[i] = Event{ID: ids[i], Key: fmt.Sprintf("k%d", i%keys)}
	}
	tt.Commit(evs...)
	return ids
}
