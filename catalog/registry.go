package catalog

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/deltabus/deltabus/storage"
)

// RegisterTopic records that the store holds the topic's own table. It is
// written right after the table's version 0, so a registered topic whose
// table is missing was deleted, never "not created yet"; a writer that
// stopped between the two leaves a table the next writer to open it
// registers before using it. A topic a group
// holds fails with ErrPlacementRace (Register).
func RegisterTopic(ctx context.Context, store storage.Store, topic string) error {
	return Register(ctx, store, Placement{Topic: topic, Table: topic})
}

// ListTopics returns the registered topics, sorted. Entries whose name is
// not a valid topic name (a stray object) are left out: a name read from
// the store never becomes a path unchecked.
func ListTopics(ctx context.Context, store storage.Store) ([]string, error) {
	dir := Prefix + "topics/"
	objs, err := store.List(ctx, dir, "")
	if err != nil {
		return nil, fmt.Errorf("list topics in %s: %w", store, err)
	}
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		n := strings.TrimPrefix(o.Key, dir)
		if CheckName("topic", n) == nil {
			names = append(names, n)
		}
	}
	return names, nil
}

// CheckWritable writes and deletes a small probe object, so a store the
// relay cannot write fails before the slot is created, not after. It also
// proves that the store honours put-if-absent: a second PutIfAbsent of the
// probe's key with other bytes must fail with storage.ErrExists. An S3
// server that ignores If-None-Match would let two writers both "win" one
// table version, and one acknowledged batch would vanish
// (ErrNoConditionalWrites). The two probes use keys of their own and run
// side by side: three requests' time instead of five, at every start.
func CheckWritable(ctx context.Context, store storage.Store, appID string) error {
	key, err := Key(KindProbe, appID)
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	cond, err := Key(KindProbe, "put-if-absent-"+NewID())
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	condErr := make(chan error, 1)
	go func() { condErr <- checkPutIfAbsent(ctx, store, cond) }()
	err = store.Put(ctx, key, []byte("deltabus write probe\n"))
	if err != nil {
		err = fmt.Errorf("write %s: %w", key, err)
	} else if err = store.Delete(ctx, key); err != nil {
		err = fmt.Errorf("delete %s: %w", key, err)
	}
	if cerr := <-condErr; err == nil {
		err = cerr
	}
	return err
}

// checkPutIfAbsent proves that a second PutIfAbsent of key fails.
func checkPutIfAbsent(ctx context.Context, store storage.Store, key string) error {
	if err := store.PutIfAbsent(ctx, key, []byte("deltabus put-if-absent probe 1\n")); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	err := store.PutIfAbsent(ctx, key, []byte("deltabus put-if-absent probe 2\n"))
	if derr := store.Delete(ctx, key); derr != nil && err != nil {
		return fmt.Errorf("delete %s: %w", key, derr)
	}
	switch {
	case errors.Is(err, storage.ErrExists):
		return nil
	case err == nil:
		return fmt.Errorf("%w: a second put-if-absent of %s succeeded", ErrNoConditionalWrites, key)
	}
	return fmt.Errorf("put-if-absent probe %s: %w", key, err)
}

// ErrNoConditionalWrites: the store overwrote an object that a
// put-if-absent (S3 If-None-Match: *) should have refused.
var ErrNoConditionalWrites = errors.New("the store does not honour conditional writes (If-None-Match), which DeltaBus needs so that two writers never both commit one table version")
