package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// topicTable is the relay's view of one topic's Delta table.
type topicTable struct {
	name  string
	store storage.Store // scoped to <root>/<topic>/
	// table is nil until the table exists; the committer creates it on the
	// first commit. Only the committer goroutine touches it after load.
	table *delta.Table
	// skipUpTo is the table's txn version for our appId when it was loaded:
	// source transactions with commit LSN <= skipUpTo are already in the
	// table and are dropped. -1 when the table has no txn of ours.
	skipUpTo int64
	// seam, after a rebuild, drops streamed transactions whose rows came
	// with the rebuild's snapshot.
	seam *seam
	// missing: the store's registry lists the topic but its table is gone
	// (deleted, lost). Its events are held, not written to a new empty
	// table, until a rebuild restores it or an abort says to start afresh.
	missing bool
	broken  string // why a table exists but cannot be read (missing is set too)
	// unusable says why an existing table at the topic's path cannot take
	// our events (another schema, a protocol we cannot write); its events
	// go to the dead-letter topic instead of blocking the stream.
	unusable string
}

// tables loads topic tables lazily, once per relay session.
type tables struct {
	root  storage.Store
	appID string
	opts  delta.Options
	mu    sync.Mutex
	m     map[string]*topicTable
}

func newTables(root storage.Store, appID string, opts delta.Options) *tables {
	return &tables{root: root, appID: appID, opts: opts, m: make(map[string]*topicTable)}
}

// get returns the topic's table, reading its snapshot on first use.
func (ts *tables) get(ctx context.Context, name string) (*topicTable, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t := ts.m[name]; t != nil {
		return t, nil
	}
	t := &topicTable{name: name, store: ts.sub(name), skipUpTo: -1}
	tbl, err := delta.OpenTable(ctx, t.store, ts.opts)
	switch {
	case errors.Is(err, delta.ErrNoTable):
		if t.missing, err = isRegistered(ctx, ts.root, name); err != nil {
			return nil, err
		}
	case errors.Is(err, delta.ErrBrokenLog):
		// Deleted under a running relay, or damaged: hold it like a
		// missing table rather than stop every topic.
		t.missing, t.broken = true, err.Error()
	case errors.Is(err, delta.ErrUnsupportedProtocol):
		t.unusable = err.Error()
	case err != nil:
		return nil, fmt.Errorf("open topic %q table: %w", name, err)
	default:
		want := topic.SchemaString(name == outbox.DeadLetterTopic)
		if got := tbl.Metadata().SchemaString; got != want {
			t.unusable = fmt.Sprintf("the table at %s has a schema DeltaBus did not write", t.store)
			break
		}
		t.table = tbl
		if v, ok := tbl.TxnVersion(ts.appID); ok {
			t.skipUpTo = v
			if t.seam, err = loadSeam(ctx, ts.root, name, v); err != nil {
				return nil, err
			}
		}
	}
	if t.unusable != "" && name == outbox.DeadLetterTopic {
		return nil, userErr(nil, "the dead-letter table %s cannot be written (%s): move it away so the relay can create its own", t.store, t.unusable)
	}
	ts.m[name] = t
	return t, nil
}

// sub is the store of a topic's table.
func (ts *tables) sub(name string) storage.Store { return storage.Sub(ts.root, name) }

// forget drops the cached handle of a topic (paused for a rebuild): the
// next get reads the table again.
func (ts *tables) forget(name string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	delete(ts.m, name)
}

// ensureTable creates the topic's table at version 0 if it does not exist
// yet (a concurrent creator winning the race is fine) and opens it.
func (t *topicTable) ensureTable(ctx context.Context, root storage.Store, opts delta.Options) error {
	if t.table != nil {
		return nil
	}
	meta, proto := topic.NewTableMetadata(t.name)
	if t.name == outbox.DeadLetterTopic {
		meta.SchemaString = topic.SchemaString(true)
	}
	if err := delta.CreateTable(ctx, t.store, meta, proto, nil); err != nil {
		return fmt.Errorf("create topic %q table: %w", t.name, err)
	}
	tbl, err := delta.OpenTable(ctx, t.store, opts)
	if err != nil {
		return fmt.Errorf("open topic %q table: %w", t.name, err)
	}
	t.table = tbl
	return registerTopic(ctx, root, t.name)
}

// registryPrefix holds one small object per topic table and per relay, so
// tools find the topics without listing every data file of the store.
const registryPrefix = "_deltabus/"

func registerTopic(ctx context.Context, root storage.Store, name string) error {
	key := registryPrefix + "topics/" + name
	if err := root.Put(ctx, key, []byte(name+"\n")); err != nil {
		return fmt.Errorf("register topic %q: %w", name, err)
	}
	return nil
}

func isRegistered(ctx context.Context, root storage.Store, name string) (bool, error) {
	_, err := root.Get(ctx, registryPrefix+"topics/"+name)
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read registry entry of topic %q: %w", name, err)
	}
	return true, nil
}

// ListTopics returns the topics registered in a store, sorted.
func ListTopics(ctx context.Context, root storage.Store) ([]string, error) {
	objs, err := root.List(ctx, registryPrefix+"topics/", "")
	if err != nil {
		return nil, fmt.Errorf("list topics in %s: %w", root, err)
	}
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		names = append(names, o.Key[len(registryPrefix+"topics/"):])
	}
	return names, nil
}

// waitCheckpoints waits for the tables' background checkpoints (graceful
// stop); a checkpoint cut short by a crash is harmless, only slower to read.
func (ts *tables) waitCheckpoints() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, t := range ts.m {
		if t.table != nil {
			t.table.Wait()
		}
	}
}
