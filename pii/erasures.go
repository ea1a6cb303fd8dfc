package pii

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pii/envelope"
	"github.com/deltabus/deltabus/pii/keys"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// ErasuresTopic is the control topic `relay erase` appends a record to for
// every erasure, so that consumers (and relays) drop the subject's cached
// keys at once instead of at their cache's TTL. It is a topic table like
// the others (the event schema), written by `relay erase`, never by the
// relay.
const ErasuresTopic = "_erasures"

// ErasureType is the type of an erasure record.
const ErasureType = "subject_erased"

// Erasure is an erasure record's payload.
type Erasure struct {
	Subject string   `json:"subject"` // the subject hash, as in envelopes
	Topics  []string `json:"topics"`  // topics whose key was deleted
	// Events is how many stored events held envelopes of the subject in
	// those topics when it was erased.
	Events int64     `json:"events"`
	At     time.Time `json:"erased_at"`
}

// RecordErasure appends an erasure record to the _erasures table of the
// store's root (creating it on first use) and returns its version.
func RecordErasure(ctx context.Context, root storage.Store, e Erasure) (int64, error) {
	st := storage.Sub(root, ErasuresTopic)
	payload, err := json.Marshal(e)
	if err != nil {
		return -1, err
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	ev := outbox.Event{ID: outbox.NewID(), Topic: ErasuresTopic, Key: e.Subject, Type: ErasureType, SchemaVersion: 1,
		Payload: string(payload), OccurredAt: now, CommitTime: now}
	w := topic.NewFileWriter(st, topic.FileOptions{})
	if err := w.Append(&ev); err != nil {
		w.Abort()
		return -1, err
	}
	adds, err := w.Close(ctx)
	if err != nil {
		return -1, fmt.Errorf("write the erasure record: %w", err)
	}
	md, proto := topic.NewTableMetadata(ErasuresTopic)
	if err := delta.CreateTable(ctx, st, md, proto, nil); err != nil {
		return -1, fmt.Errorf("create %s: %w", ErasuresTopic, err)
	}
	tbl, err := delta.OpenTable(ctx, st, delta.Options{EngineInfo: "deltabus-erase"})
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", ErasuresTopic, err)
	}
	v, err := tbl.Commit(ctx, delta.CommitActions{Adds: adds, Operation: "WRITE"})
	if err != nil {
		return -1, fmt.Errorf("commit to %s: %w", ErasuresTopic, err)
	}
	return v, nil
}

// ErasureWatcher follows the _erasures table and drops erased subjects'
// keys from a key store's cache.
type ErasureWatcher struct {
	store   storage.Store // the store's root
	keys    *keys.Store
	version int64
	seen    map[string]bool // data files read (or present at start)
	log     *slog.Logger
}

// NewErasureWatcher returns a watcher; its first Poll takes the records
// already there as seen (a new process caches no key yet).
func NewErasureWatcher(root storage.Store, ks *keys.Store, log *slog.Logger) *ErasureWatcher {
	if log == nil {
		log = slog.Default()
	}
	return &ErasureWatcher{store: root, keys: ks, version: -2, log: log}
}

// Poll reads the records added since the last poll and forgets their
// subjects' keys. It costs one listing when nothing changed.
func (w *ErasureWatcher) Poll(ctx context.Context) error {
	st := storage.Sub(w.store, ErasuresTopic)
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if errors.Is(err, delta.ErrNoTable) {
		if w.version == -2 {
			w.version, w.seen = -1, map[string]bool{}
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", ErasuresTopic, err)
	}
	first := w.version == -2
	if snap.Version == w.version {
		return nil
	}
	if w.seen == nil {
		w.seen = map[string]bool{}
	}
	for k, add := range snap.Files {
		if w.seen[k] {
			continue
		}
		w.seen[k] = true
		if first {
			continue
		}
		err := topic.ReadEvents(ctx, st, add, func(ev outbox.Event) error {
			var e Erasure
			if json.Unmarshal([]byte(ev.Payload), &e) != nil {
				return nil
			}
			sub, err := envelope.ParseSubject(e.Subject)
			if err != nil {
				return nil
			}
			w.keys.Forget("", sub)
			return nil
		})
		if err != nil {
			return fmt.Errorf("read %s: %w", ErasuresTopic, err)
		}
	}
	w.version = snap.Version
	return nil
}

// Run polls every interval until ctx ends, logging failures (the cache's
// TTL still bounds how long an erased key is used).
func (w *ErasureWatcher) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := w.Poll(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("cannot follow the erasure records; cached keys of erased subjects go at their TTL", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// CountSubject counts the events of a topic whose payload holds an
// envelope of sub, reading every data file of its table's latest version
// that may hold the topic, never decrypting. It also returns the topic's
// events read. A topic of a topic group is read from its group's table:
// only the files whose topic bounds reach it, and of them only its rows.
func CountSubject(ctx context.Context, root storage.Store, topicName string, sub envelope.Subject) (matched, total int64, err error) {
	p, err := catalog.Locate(ctx, root, topicName)
	if err != nil {
		return 0, 0, fmt.Errorf("read topic %q: %w", topicName, err)
	}
	st := storage.Sub(root, p.Table)
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if errors.Is(err, delta.ErrNoTable) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read topic %q: %w", topicName, err)
	}
	needle := string(envelope.SubjectNeedle(sub))
	for _, add := range snap.Files {
		if p.Shared() && !topic.MayHold(add.Stats, topicName) {
			continue
		}
		err := topic.ReadEvents(ctx, st, add, func(ev outbox.Event) error {
			if p.Shared() && ev.Topic != topicName {
				return nil
			}
			total++
			if containsString(ev.Payload, needle) {
				matched++
			}
			return nil
		})
		if err != nil {
			return 0, 0, fmt.Errorf("read topic %q file %s: %w", topicName, add.Path, err)
		}
	}
	return matched, total, nil
}
