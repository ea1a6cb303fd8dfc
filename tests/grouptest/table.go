// Package grouptest writes topic groups and their shared tables for
// tests, the way the relay does: catalog.WriteGroup, then
// sink/deltasink's Open and one commit per table per batch, the rows of a
// group's topics mixed in its data files, one txn per topic.
//
// Table writes one group's table and remembers each topic's events and
// positions, for tests of what consumers of one topic of a group get
// (subscribe, relay consume, consumer checks). Batch and Commit write
// batches that may span group tables and topics' own tables, for tests of
// what describes topics (topicmeta, unitycatalog, governance, statuspage,
// pii, cmd/relay).
package grouptest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/deltasink"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// AppID is the relay appId the table is written under.
const AppID = "deltabus-test"

// Table is one group's table being written.
type Table struct {
	t     testing.TB
	Root  storage.Store
	Group string
	Table string // the table's folder under Root (catalog.GroupTable)
	// Events are each topic's events, in commit order.
	Events map[string][]outbox.Event
	// Positions are each event's (version, offset among its topic's
	// events of the version), by event id.
	Positions map[string][2]int64
	sink      *deltasink.Sink
	opened    map[string]bool
	lsn       int64
	n         int
}

// Options shape the table's data files; zero: the sink's defaults.
type Options struct {
	MaxFileRows, RowGroupRows int
}

// New creates group name of patterns in root and returns its writer.
func New(t testing.TB, root storage.Store, name string, patterns []string, o Options) *Table {
	t.Helper()
	Group(t, root, name, patterns...)
	files := topic.FileOptions{MaxFileRows: o.MaxFileRows, RowGroupRows: o.RowGroupRows}
	return &Table{t: t, Root: root, Group: name, Table: catalog.GroupTable(name), Events: map[string][]outbox.Event{},
		Positions: map[string][2]int64{}, opened: map[string]bool{}, lsn: 1 << 20,
		sink: deltasink.New(root, deltasink.Options{AppID: AppID, SyncCheckpoints: true, Files: files})}
}

// Commit writes one version: one event of topics[i] for each i, in that
// order, a new source transaction every 3 events, and returns the
// version. Every topic must be one of the group's.
func (g *Table) Commit(topics ...string) int64 {
	g.t.Helper()
	ctx := context.Background()
	b := g.sink.NewBatch()
	now := time.Now().UTC().Truncate(time.Millisecond)
	var evs []outbox.Event
	for i, name := range topics {
		if !g.opened[name] {
			tp, err := g.sink.Open(ctx, name)
			if err != nil {
				g.t.Fatal(err)
			}
			if tp.Table != g.Table {
				g.t.Fatalf("topic %q opened in table %q, want %q", name, tp.Table, g.Table)
			}
			g.opened[name] = true
		}
		if i%3 == 0 {
			g.lsn += 100
		}
		g.n++
		h := fmt.Sprintf(`{"n":"%d"}`, g.n)
		e := outbox.Event{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", g.n), Topic: name, Key: fmt.Sprintf("k%d", g.n%5),
			Type: "Happened", SchemaVersion: 1, Payload: fmt.Sprintf(`{"n":%d,"topic":%q}`, g.n, name), Headers: &h,
			OccurredAt: now, CommitLSN: g.lsn, Seq: int32(i % 3), Xid: g.lsn / 100, CommitTime: now}
		if err := b.Append(&e); err != nil {
			g.t.Fatal(err)
		}
		evs = append(evs, e)
	}
	c, err := b.Commit(ctx, g.Table, g.lsn)
	if err != nil {
		g.t.Fatal(err)
	}
	offsets := map[string]int64{}
	for _, e := range evs {
		e.Source = AppID
		g.Events[e.Topic] = append(g.Events[e.Topic], e)
		g.Positions[e.ID] = [2]int64{c.Version, offsets[e.Topic]}
		offsets[e.Topic]++
	}
	return c.Version
}

// IDs returns the ids of topic's events.
func (g *Table) IDs(topic string) []string {
	var out []string
	for _, e := range g.Events[topic] {
		out = append(out, e.ID)
	}
	return out
}

// Store returns the table's root.
func (g *Table) Store() storage.Store { return storage.Sub(g.Root, g.Table) }

// ID returns the table's Delta id (metaData.id).
func (g *Table) ID() string {
	g.t.Helper()
	snap, err := delta.LoadSnapshot(context.Background(), g.Store(), -1)
	if err != nil {
		g.t.Fatal(err)
	}
	return snap.Metadata.ID
}

// DataFiles returns, per version, the data files its commit adds with
// their stats, in log order.
func (g *Table) DataFiles(version int64) []delta.Add {
	g.t.Helper()
	data, err := g.Store().Get(context.Background(), delta.CommitKey(version))
	if err != nil {
		g.t.Fatal(err)
	}
	acts, err := delta.ParseCommit(data)
	if err != nil {
		g.t.Fatal(err)
	}
	var out []delta.Add
	for _, a := range acts {
		if a.Add != nil && a.Add.DataChange {
			out = append(out, *a.Add)
		}
	}
	return out
}

// Close waits for the sink's background work.
func (g *Table) Close() { g.sink.Close(context.Background()) }
