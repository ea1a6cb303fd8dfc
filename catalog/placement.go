package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/deltabus/deltabus/storage"
)

// Placement says which table holds a topic's events: the topic's own
// table (Table == Topic) or its group's (GroupTable), which it shares with
// the group's other topics and where its rows are those whose topic column
// is its name.
//
// In a shared table each topic's progress is its own Delta txn, appId
// TxnAppID(relay appId): the exactly-once argument (package doc) holds per
// (source, topic) unchanged, and a hold or a rebuild of one topic of a
// group touches no other.
type Placement struct {
	Topic string
	Table string
	// TableID is, for a grouped topic that is registered, the Delta table
	// id (metaData.id) of the group table its events were written to: a
	// group table deleted and created again has another id, and the
	// topic's history is then missing, never silently empty.
	TableID string
	// Registered: the registry holds the topic (its table, or its group
	// table, was written to).
	Registered bool
}

// Group returns the topic's group, "" when it has its own table.
func (p Placement) Group() string {
	if g, ok := GroupOfTable(p.Table); ok {
		return g
	}
	return ""
}

// Shared reports whether the topic shares a group's table.
func (p Placement) Shared() bool { return p.Table != p.Topic }

// TxnAppID is the Delta txn appId under which relay appID records the
// topic's position in its table: the appId itself in a topic's own table,
// appId/topic in a group's.
func (p Placement) TxnAppID(appID string) string { return TxnAppID(appID, p.Topic, p.Shared()) }

// Replaced reports whether the topic was written to another table than
// the one with table id tableID at its place: a grouped topic registered
// with an id its group's table no longer has (the table was deleted and
// created again, and the topic's rows went with the old one).
func (p Placement) Replaced(tableID string) bool {
	return p.Shared() && p.Registered && p.TableID != "" && p.TableID != tableID
}

// TxnAppID is Placement.TxnAppID for a topic that is or is not shared.
func TxnAppID(appID, topic string, shared bool) string {
	if shared {
		return appID + "/" + topic
	}
	return appID
}

// SplitTxnAppID is TxnAppID's inverse: the relay appId and the topic of a
// txn appId of a group's table (shared=true), or the appId itself.
func SplitTxnAppID(txnAppID string) (appID, topic string, shared bool) {
	return strings.Cut(txnAppID, "/")
}

// entry is a grouped topic's registry entry; a topic with its own table
// has the entry "<topic>\n" (as every release before groups wrote it).
type entry struct {
	Topic   string `json:"topic"`
	Table   string `json:"table"`
	TableID string `json:"tableId"`
}

func (p Placement) entry() []byte {
	if !p.Shared() {
		return []byte(p.Topic + "\n")
	}
	b, _ := json.Marshal(entry{Topic: p.Topic, Table: p.Table, TableID: p.TableID})
	return append(b, '\n')
}

// parseEntry reads a registry entry of topic.
func parseEntry(topic string, b []byte) (Placement, error) {
	p := Placement{Topic: topic, Table: topic, Registered: true}
	if len(b) == 0 || b[0] != '{' {
		return p, nil
	}
	var e entry
	if err := json.Unmarshal(b, &e); err != nil {
		return p, fmt.Errorf("registry entry of topic %q is corrupt: %w", topic, err)
	}
	g, ok := GroupOfTable(e.Table)
	if e.Topic != topic || !ok || internal(topic) || (Group{Name: g, Topics: []string{"x"}}).Check() != nil {
		return p, fmt.Errorf("registry entry of topic %q is corrupt: it names topic %q in table %q", topic, truncate(e.Topic), truncate(e.Table))
	}
	p.Table, p.TableID = e.Table, e.TableID
	return p, nil
}

// ReadPlacement reads where the topic lives: its registry entry, or, for
// a topic not registered, the first of groups that matches it (its own
// table when none does). groups is what ListGroups returned, read by the
// caller as often as it wants new groups to be seen. An internal topic
// (_dead_letter: a name starting with "_") always has its own table: no
// group matches it, and an entry placing it in one is corrupt.
func ReadPlacement(ctx context.Context, store storage.Store, topic string, groups []Group) (Placement, error) {
	key, err := Key(KindTopic, topic)
	if err != nil {
		return Placement{}, fmt.Errorf("catalog: %w", err)
	}
	b, err := store.Get(ctx, key)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		p := Placement{Topic: topic, Table: topic}
		if g, ok := MatchGroup(groups, topic); ok {
			p.Table = GroupTable(g.Name)
		}
		return p, nil
	case err != nil:
		return Placement{}, fmt.Errorf("read registry entry of topic %q: %w", topic, err)
	}
	return parseEntry(topic, b)
}

// ListTables returns the tables of the registered topics, each once (a
// group's table holds many topics), in the order of ListTopics.
func ListTables(ctx context.Context, store storage.Store) ([]string, error) {
	topics, err := ListTopics(ctx, store)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, name := range topics {
		p, err := ReadPlacement(ctx, store, name, nil)
		if err != nil {
			return nil, err
		}
		if !seen[p.Table] {
			seen[p.Table] = true
			out = append(out, p.Table)
		}
	}
	return out, nil
}

// Locate reads where the topic lives, listing the groups itself: for
// tools that look a topic up once.
func Locate(ctx context.Context, store storage.Store, topic string) (Placement, error) {
	if internal(topic) {
		return ReadPlacement(ctx, store, topic, nil) // no group can hold it
	}
	groups, err := ListGroups(ctx, store)
	if err != nil {
		return Placement{}, err
	}
	return ReadPlacement(ctx, store, topic, groups)
}

// Register records the topic's placement in the registry, once: a topic
// already registered in the same place (the same entry) is left as it
// is, and one registered elsewhere fails with ErrPlacementRace (a writer
// that read no entry lost the race to one that placed the topic
// otherwise; it reads the entry again). A topic's own table is registered
// right after its version 0, a grouped topic before its first rows are
// committed, with the group table's id.
func Register(ctx context.Context, store storage.Store, p Placement) error {
	key, err := Key(KindTopic, p.Topic)
	if err != nil {
		return fmt.Errorf("register topic: %w", err)
	}
	want := p.entry()
	err = store.PutIfAbsent(ctx, key, want)
	if !errors.Is(err, storage.ErrExists) {
		if err != nil {
			return fmt.Errorf("register topic %q: %w", p.Topic, err)
		}
		return nil
	}
	got, err := store.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("register topic %q: %w", p.Topic, err)
	}
	if bytes.Equal(got, want) {
		return nil
	}
	cur, err := parseEntry(p.Topic, got)
	if err != nil {
		return err
	}
	if cur.Table == p.Table && cur.TableID == p.TableID {
		return nil
	}
	return fmt.Errorf("topic %q is registered in table %q, not %q: %w", p.Topic, cur.Table, p.Table, ErrPlacementRace)
}

// Reregister replaces a grouped topic's registry entry: a rebuild that
// restores the topic into its group's current table records that table's
// id.
func Reregister(ctx context.Context, store storage.Store, p Placement) error {
	key, err := Key(KindTopic, p.Topic)
	if err != nil {
		return fmt.Errorf("register topic: %w", err)
	}
	if err := store.Put(ctx, key, p.entry()); err != nil {
		return fmt.Errorf("register topic %q: %w", p.Topic, err)
	}
	return nil
}
