package members

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
)

// The log's timing rules (the package doc's "Clean-up" argument):
// entries at or before a snapshot are deleted once they are logRetain
// older, by the store's clock, than the newest entry; a writer appends
// only while its knowledge of the head is younger than confirmFor, and
// gives each put at most putTimeout. confirmFor + putTimeout <
// logRetain, with room for the store's own delays.
const (
	confirmFor = 3 * time.Second
	putTimeout = 20 * time.Second
)

var logRetain = 60 * time.Second // a variable for tests

// maxEntryBytes bounds what a reader takes for an entry or a snapshot:
// anything larger is not ours (a snapshot of 100,000 events in flight is
// about 10 MB).
const maxEntryBytes = 256 << 20

// groupLog reads and writes one group's log in the store.
type groupLog struct {
	store        storage.Store // the DeltaBus store root
	group, topic string
	dir          string // catalog.MemberDir
}

func newGroupLog(store storage.Store, group, topic string) (*groupLog, error) {
	dir, err := catalog.MemberDir(group, topic)
	if err != nil {
		return nil, err
	}
	return &groupLog{store: store, group: group, topic: topic, dir: dir}, nil
}

func (l *groupLog) key(kind catalog.Kind, seq int64) string {
	k, err := catalog.Key(kind, l.group, l.topic, strconv.FormatInt(seq, 10))
	if err != nil {
		panic(err) // names were checked by newGroupLog
	}
	return k
}

// seqOf reads the sequence number of an entry or snapshot key.
func seqOf(key string) (int64, bool) {
	kind, names, ok := catalog.Parse(key)
	if !ok || (kind != catalog.KindMemberEntry && kind != catalog.KindMemberSnapshot) {
		return 0, false
	}
	n, err := strconv.ParseInt(names[2], 10, 64)
	return n, err == nil
}

// logged is one entry read from the log.
type logged struct {
	seq int64
	e   entry
	raw []byte
	mod time.Time
}

// exists reports whether the group has a log at all.
func (l *groupLog) exists(ctx context.Context) (bool, error) {
	objs, err := l.store.List(ctx, l.dir, "")
	if err != nil {
		return false, fmt.Errorf("list group %q topic %q: %w", l.group, l.topic, err)
	}
	return len(objs) > 0, nil
}

// load reads the newest snapshot and the entries after it. A new group
// has no log: its state is empty at Seq 0. confirmed is when the listing
// that found the head started (the head was the head then).
func (l *groupLog) load(ctx context.Context) (st *state, confirmed time.Time, err error) {
	for attempt := 0; ; attempt++ {
		st, confirmed, err = l.loadOnce(ctx)
		if !errors.Is(err, errGap) || attempt >= 5 {
			return st, confirmed, err
		}
	}
}

var errGap = errors.New("entries missing after the snapshot")

func (l *groupLog) loadOnce(ctx context.Context) (*state, time.Time, error) {
	snaps, err := l.store.List(ctx, l.dir+catalog.MemberSnapshotDir, "")
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("list the snapshots of group %q topic %q: %w", l.group, l.topic, err)
	}
	st := newState()
	for i := len(snaps) - 1; i >= 0; i-- {
		seq, ok := seqOf(snaps[i].Key)
		if !ok {
			continue
		}
		data, err := l.store.Get(ctx, snaps[i].Key)
		if errors.Is(err, storage.ErrNotFound) {
			return nil, time.Time{}, errGap // cleaned while we listed: read again
		}
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("read snapshot %s: %w", snaps[i].Key, err)
		}
		if st, err = unmarshalState(data, l.group, l.topic); err != nil || st.Seq != seq {
			return nil, time.Time{}, fmt.Errorf("snapshot %s in %s is damaged (%v): the group's state cannot be read; "+
				"reset the group to go on", snaps[i].Key, l.store, err)
		}
		break
	}
	entries, confirmed, err := l.readAfter(ctx, st.Seq)
	if err != nil {
		return nil, time.Time{}, err
	}
	for _, e := range entries {
		st.apply(e.seq, &e.e)
	}
	return st, confirmed, nil
}

// readAfter lists and reads the entries after seq, in order; confirmed is
// when the listing started. An entry missing in the middle (a gap) is
// errGap: the clean-up passed seq, load from the newest snapshot.
func (l *groupLog) readAfter(ctx context.Context, seq int64) ([]logged, time.Time, error) {
	confirmed := time.Now()
	objs, err := l.store.List(ctx, l.dir+catalog.MemberLogDir, l.key(catalog.KindMemberEntry, seq))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("list the log of group %q topic %q: %w", l.group, l.topic, err)
	}
	var out []logged
	next := seq + 1
	for _, o := range objs {
		n, ok := seqOf(o.Key)
		if !ok || n < next {
			continue
		}
		if n > next {
			return nil, time.Time{}, errGap
		}
		data, err := l.store.Get(ctx, o.Key)
		if errors.Is(err, storage.ErrNotFound) {
			return nil, time.Time{}, errGap
		}
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("read entry %s: %w", o.Key, err)
		}
		lg := logged{seq: n, raw: data, mod: o.ModTime}
		if err := decodeEntry(data, &lg.e); err != nil {
			return nil, time.Time{}, fmt.Errorf("entry %s in %s is damaged: %w", o.Key, l.store, err)
		}
		out = append(out, lg)
		next++
	}
	return out, confirmed, nil
}

func decodeEntry(data []byte, e *entry) error {
	if len(data) > maxEntryBytes {
		return fmt.Errorf("%d bytes, more than an entry can be", len(data))
	}
	return json.Unmarshal(data, e)
}

// put writes entry seq if no entry has that number yet: storage.ErrExists
// when another writer got it first. An ambiguous failure is retried with
// the same bytes (which resolves it: nil when they landed) until
// putTimeout.
func (l *groupLog) put(ctx context.Context, seq int64, data []byte) error {
	ctx, cancel := context.WithTimeout(ctx, putTimeout)
	defer cancel()
	key := l.key(catalog.KindMemberEntry, seq)
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		err := l.store.PutIfAbsent(ctx, key, data)
		if err == nil || errors.Is(err, storage.ErrExists) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
	}
}

// writeSnapshot stores the state (already marshalled) at its sequence.
func (l *groupLog) writeSnapshot(ctx context.Context, seq int64, data []byte) error {
	return l.store.Put(ctx, l.key(catalog.KindMemberSnapshot, seq), data)
}

// clean deletes the entries at or before the newest snapshot, and the
// snapshots before it, that are logRetain older than the newest entry
// (store times against store times: no clock of ours is compared).
func (l *groupLog) clean(ctx context.Context) (deleted int, err error) {
	snaps, err := l.store.List(ctx, l.dir+catalog.MemberSnapshotDir, "")
	if err != nil || len(snaps) == 0 {
		return 0, err
	}
	upTo, ok := seqOf(snaps[len(snaps)-1].Key)
	if !ok {
		return 0, nil
	}
	ents, err := l.store.List(ctx, l.dir+catalog.MemberLogDir, "")
	if err != nil || len(ents) == 0 {
		return 0, err
	}
	horizon := ents[len(ents)-1].ModTime.Add(-logRetain)
	for _, o := range append(ents, snaps[:len(snaps)-1]...) {
		n, ok := seqOf(o.Key)
		if !ok || n > upTo || !o.ModTime.Before(horizon) {
			continue
		}
		if err := l.store.Delete(ctx, o.Key); err != nil {
			return deleted, err
		}
		deleted++
	}
	return deleted, nil
}
