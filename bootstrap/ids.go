package bootstrap

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/google/uuid"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// idKey is a 16-byte event identity: the uuid of an event, or a hash of a
// dead letter's source table and raw row (dead letters may lack a usable
// id, and their raw row is what makes them unique).
type idKey struct{ hi, lo uint64 }

func cmpKey(a, b idKey) int {
	if c := cmp.Compare(a.hi, b.hi); c != 0 {
		return c
	}
	return cmp.Compare(a.lo, b.lo)
}

func keyOf16(b [16]byte) idKey {
	return idKey{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// eventKey parses an event id; ok is false for a non-uuid id.
func eventKey(id string) (idKey, bool) {
	u, err := uuid.Parse(id)
	if err != nil {
		return idKey{}, false
	}
	return keyOf16(u), true
}

func deadLetterKey(sourceTable, rawRow string) idKey {
	h := sha256.New()
	h.Write([]byte(sourceTable))
	h.Write([]byte{0})
	h.Write([]byte(rawRow))
	var sum [32]byte
	h.Sum(sum[:0])
	var k [16]byte
	copy(k[:], sum[:16])
	return keyOf16(k)
}

// idSet is a sorted, immutable set of keys: 16 bytes per event, searched
// without locks by every copy connection.
type idSet struct {
	keys []idKey
	txn  int64 // the table's txn version for our appId when read
}

func (s *idSet) has(k idKey) bool {
	if s == nil {
		return false
	}
	_, ok := slices.BinarySearchFunc(s.keys, k, cmpKey)
	return ok
}

// sort makes the set's keys sorted and unique, once they are all in.
func (s *idSet) sort() {
	slices.SortFunc(s.keys, cmpKey)
	s.keys = slices.CompactFunc(s.keys, func(a, b idKey) bool { return a == b })
}

// union returns a set of the keys of s and o (either may be nil) with s's
// txn (-1 when s is nil).
func (s *idSet) union(o *idSet) *idSet {
	u := &idSet{txn: -1}
	if s != nil {
		u.txn = s.txn
		u.keys = append(u.keys, s.keys...)
	}
	if o != nil {
		u.keys = append(u.keys, o.keys...)
	}
	u.sort()
	return u
}

func (s *idSet) len() int {
	if s == nil {
		return 0
	}
	return len(s.keys)
}

// existingIDs reads, for every registered topic whose table holds this
// relay's txn for it (appID in a topic's own table, appID/topic in a
// group's: catalog.Placement.TxnAppID), or its republish counter's
// (catalog.RepublishAppID), the identity of every event of the topic the
// table holds. Topics without such a txn hold none of our events and are
// not read; a group's table is read once for all of its topics.
func existingIDs(ctx context.Context, root storage.Store, appID string, pl *places) (map[string]*idSet, error) {
	names, err := catalog.ListTopics(ctx, root)
	if err != nil {
		return nil, err
	}
	var tables []string
	byTable := map[string][]catalog.Placement{}
	for _, name := range names {
		p, err := pl.of(ctx, name)
		if err != nil {
			return nil, err
		}
		if byTable[p.Table] == nil {
			tables = append(tables, p.Table)
		}
		byTable[p.Table] = append(byTable[p.Table], p)
	}
	sets := map[string]*idSet{}
	for _, table := range tables {
		got, err := tableIDs(ctx, root, table, byTable[table], appID)
		if err != nil {
			return nil, err
		}
		maps.Copy(sets, got)
	}
	return sets, nil
}

// topicIDs reads the identity of every event of one topic; nil when its
// table does not exist or holds no txn of this relay for the topic.
func topicIDs(ctx context.Context, root storage.Store, p catalog.Placement, appID string) (*idSet, error) {
	sets, err := tableIDs(ctx, root, p.Table, []catalog.Placement{p}, appID)
	return sets[p.Topic], err
}

// tableIDs reads the events of the topics ps (all placed in table) that
// table holds. In a group's table it reads only the files whose stats say
// they may hold one of them (topic.MayHold), and of those only the rows
// of these topics.
func tableIDs(ctx context.Context, root storage.Store, table string, ps []catalog.Placement, appID string) (map[string]*idSet, error) {
	st := storage.Sub(root, table)
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if errors.Is(err, delta.ErrNoTable) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", tableName(table), err)
	}
	sets := map[string]*idSet{}
	for _, p := range ps {
		txn, ok := snap.Txns[p.TxnAppID(appID)]
		// Events a redrive or a repair published (package republish)
		// are the source's too, though its relay may never have
		// committed to the table.
		_, republished := snap.Txns[p.TxnAppID(catalog.RepublishAppID(appID))]
		switch {
		case ok:
			sets[p.Topic] = &idSet{txn: txn.Version}
		case republished:
			sets[p.Topic] = &idSet{txn: -1}
		}
	}
	if len(sets) == 0 {
		return nil, nil
	}
	r := keyReader{st: st, table: table, sets: sets, shared: ps[0].Shared(), names: slices.Sorted(maps.Keys(sets)),
		ours: func(source string) bool { return source == appID || (source == "" && catalog.LegacyLayout(appID)) }}
	for _, add := range snap.Files {
		if r.shared && !mayHoldAny(add.Stats, r.names) {
			continue
		}
		if err := r.read(ctx, add); err != nil {
			return nil, err
		}
	}
	for _, set := range sets {
		set.sort()
	}
	return sets, nil
}

// tableName names a table in messages: a topic's, or a group's.
func tableName(table string) string {
	if g, ok := catalog.GroupOfTable(table); ok {
		return fmt.Sprintf("group %q table %s", g, table)
	}
	return fmt.Sprintf("topic %q table", table)
}

// mayHoldAny reports whether a data file of a group's table may hold rows
// of one of names (sorted): its topic bounds are parsed once, however many
// topics are asked about.
func mayHoldAny(stats string, names []string) bool {
	if len(names) == 1 {
		return topic.MayHold(stats, names[0])
	}
	lo, hi, ok := topic.TopicBounds(stats)
	if !ok {
		return true
	}
	i, _ := slices.BinarySearch(names, lo)
	return i < len(names) && names[i] <= hi
}

// keyReader collects the keys of the events of one table's data files
// that are this relay's (ours, by their source column): another source's
// event with the same id (a database copied from another) is not one this
// relay holds. In a topic's own table every row is the topic's; in a
// group's, each row goes to its topic's set, if that topic is asked for.
type keyReader struct {
	st     storage.Store
	table  string
	shared bool
	names  []string
	sets   map[string]*idSet
	ours   func(source string) bool
}

func (r *keyReader) read(ctx context.Context, add delta.Add) error {
	var err error
	if r.table == outbox.DeadLetterTopic {
		set := r.sets[r.table]
		err = topic.ReadDeadLetters(ctx, r.st, add, func(d outbox.DeadLetter) error {
			if r.ours(d.Source) {
				set.keys = append(set.keys, deadLetterKey(d.SourceTable, d.RawRow))
			}
			return nil
		})
	} else {
		own := r.sets[r.table]
		err = topic.ReadEventIDs(ctx, r.st, add, func(e topic.EventRef) error {
			set := own
			if r.shared {
				set = r.sets[e.Topic]
			}
			if k, ok := eventKey(e.ID); ok && set != nil && r.ours(e.Source) {
				set.keys = append(set.keys, k)
			}
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("read event ids of %s: %w", tableName(r.table), err)
	}
	return nil
}
