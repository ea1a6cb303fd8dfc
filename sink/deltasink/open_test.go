package deltasink

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// gate holds the first put of one key until released: a commit caught
// between taking its table's handle and writing its log entry.
type gate struct {
	storage.Store
	key      string
	reached  chan struct{}
	release  chan struct{}
	reachedO sync.Once
}

func (g *gate) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if key == g.key {
		g.reachedO.Do(func() { close(g.reached) })
		<-g.release
	}
	return g.Store.PutIfAbsent(ctx, key, data)
}

func event(topicName string, i int) *outbox.Event {
	at := time.Unix(1700000000, 0).UTC()
	return &outbox.Event{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), Topic: topicName, Key: "k", Type: "t",
		SchemaVersion: 1, Payload: `{}`, OccurredAt: at, CommitLSN: int64(i), CommitTime: at}
}

func commitOne(ctx context.Context, t *testing.T, s *Sink, table string, pos int64, evs ...*outbox.Event) error {
	t.Helper()
	b := s.NewBatch()
	for _, ev := range evs {
		if err := b.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	_, err := b.Commit(ctx, table, pos)
	return err
}

// TestOpenDuringAGroupCommit: the relay opens a topic new to the session
// while the committer is committing other topics of the same group table.
// Open used to read the group table into a new handle that replaced the
// committer's: the commit in flight landed through the old handle, and the
// next commit, through the new one, found it in the log and took it for
// another writer with the relay's identity (the session restarted, and a
// topic table created in that moment was left unregistered). Open now
// brings the sink's handle up to date in place.
func TestOpenDuringAGroupCommit(t *testing.T) {
	ctx := context.Background()
	local, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	table := catalog.GroupTable("ops")
	g := &gate{Store: local, key: table + "/" + delta.CommitKey(2), reached: make(chan struct{}), release: make(chan struct{})}
	if err := catalog.WriteGroup(ctx, local, catalog.Group{Name: "ops", Topics: []string{"ops.*"}}); err != nil {
		t.Fatal(err)
	}
	s := New(g, Options{AppID: "deltabus-1-s", SyncCheckpoints: true})
	if tp, err := s.Open(ctx, "ops.one"); err != nil || tp.Table != table {
		t.Fatalf("open ops.one: %+v %v", tp, err)
	}
	if err := commitOne(ctx, t, s, table, 1, event("ops.one", 1)); err != nil {
		t.Fatal(err)
	}
	inFlight := make(chan error, 1)
	go func() { inFlight <- commitOne(ctx, t, s, table, 2, event("ops.one", 2)) }()
	<-g.reached
	opened := make(chan error, 1)
	go func() {
		tp, err := s.Open(ctx, "ops.two")
		if err == nil && (tp.Status != sink.Ready || tp.Position != -1) {
			err = fmt.Errorf("ops.two opened as %+v; want a topic with no events in a ready table", tp)
		}
		opened <- err
	}()
	select { // the old Open ended before the commit it raced; the new one waits for it
	case err := <-opened:
		opened <- err
	case <-time.After(300 * time.Millisecond):
	}
	close(g.release)
	if err := <-inFlight; err != nil {
		t.Fatalf("commit in flight: %v", err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("open ops.two: %v", err)
	}
	if err := commitOne(ctx, t, s, table, 3, event("ops.one", 3), event("ops.two", 4)); err != nil {
		t.Fatalf("the commit after Open: %v", err)
	}
	for name, want := range map[string][]string{"ops.one": {event("", 1).ID, event("", 2).ID, event("", 3).ID}, "ops.two": {event("", 4).ID}} {
		if ids := readIDs(t, local, name); !slices.Equal(ids, want) {
			t.Errorf("%s holds %v; want %v", name, ids, want)
		}
	}
}

// TestOpenRegistersAnOwnTableLeftUnregistered: a topic's own table is
// registered right after its version 0; a session that ended between the
// two (a crash, or an error elsewhere cancelling the commit) left a table
// the registry did not list, and the next session, finding the table,
// wrote to it without registering it, so listings (verify, reconcile,
// status) never saw its events. Open registers it.
func TestOpenRegistersAnOwnTableLeftUnregistered(t *testing.T) {
	ctx := context.Background()
	root, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	meta, proto := topic.NewTableMetadata("orders")
	if err := delta.CreateTable(ctx, storage.Sub(root, "orders"), meta, proto, nil); err != nil {
		t.Fatal(err)
	}
	s := New(root, Options{AppID: "deltabus-1-s", SyncCheckpoints: true})
	if _, err := s.Open(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if err := commitOne(ctx, t, s, "orders", 1, event("orders", 1)); err != nil {
		t.Fatal(err)
	}
	names, err := catalog.ListTopics(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(names, "orders") {
		t.Fatalf("registered topics %v lack orders, whose table the sink opened and wrote", names)
	}
}
