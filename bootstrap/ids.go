package bootstrap

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
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

func (s *idSet) len() int {
	if s == nil {
		return 0
	}
	return len(s.keys)
}

// existingIDs reads, for every registered topic whose table holds a txn of
// appID (a commit of this relay), the identity of every event it holds.
// Topics without such a txn hold none of our events and are not read.
func existingIDs(ctx context.Context, root storage.Store, appID string) (map[string]*idSet, error) {
	names, err := catalog.ListTopics(ctx, root)
	if err != nil {
		return nil, err
	}
	sets := map[string]*idSet{}
	for _, name := range names {
		set, err := topicIDs(ctx, root, name, appID)
		if err != nil {
			return nil, err
		}
		if set != nil {
			sets[name] = set
		}
	}
	return sets, nil
}

// topicIDs reads the identity of every event in one topic's table; nil when
// the table does not exist or holds no txn of appID.
func topicIDs(ctx context.Context, root storage.Store, name, appID string) (*idSet, error) {
	st := storage.Sub(root, name)
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if errors.Is(err, delta.ErrNoTable) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read topic %q table: %w", name, err)
	}
	txn, ok := snap.Txns[appID]
	if !ok {
		return nil, nil
	}
	set := &idSet{txn: txn.Version}
	ours := func(source string) bool { return source == appID || (source == "" && catalog.LegacyLayout(appID)) }
	for _, add := range snap.Files {
		if err := readKeys(ctx, st, name, add, ours, set); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(set.keys, cmpKey)
	set.keys = slices.CompactFunc(set.keys, func(a, b idKey) bool { return a == b })
	return set, nil
}

// readKeys collects the keys of the events of one data file that are this
// relay's (ours, by their source column): another source's event with the
// same id (a database copied from another) is not one this relay holds.
func readKeys(ctx context.Context, st storage.Store, name string, add delta.Add, ours func(string) bool, set *idSet) error {
	var err error
	if name == outbox.DeadLetterTopic {
		err = topic.ReadDeadLetters(ctx, st, add, func(d outbox.DeadLetter) error {
			if ours(d.Source) {
				set.keys = append(set.keys, deadLetterKey(d.SourceTable, d.RawRow))
			}
			return nil
		})
	} else {
		err = topic.ReadEventIDs(ctx, st, add, func(r topic.EventRef) error {
			if k, ok := eventKey(r.ID); ok && ours(r.Source) {
				set.keys = append(set.keys, k)
			}
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("read event ids of topic %q: %w", name, err)
	}
	return nil
}
