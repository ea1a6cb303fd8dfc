package bootstrap

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/relay"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// commitTopics makes one Delta commit per topic holding all of the topic's
// snapshot files, in unit order, with txn{appID, version}. A topic whose
// rows were all present already gets no commit.
func (j *copyJob) commitTopics(ctx context.Context, appID string, version int64) (map[string]TopicResult, error) {
	out := map[string]TopicResult{}
	names := make([]string, 0, len(j.added))
	for name := range j.added {
		names = append(names, name)
	}
	for name := range j.skipped {
		if _, ok := j.added[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		files := j.results[name]
		slices.SortFunc(files, compareFiles)
		var adds []delta.Add
		for _, f := range files {
			adds = append(adds, f.adds...)
		}
		res := TopicResult{Added: j.added[name], Skipped: j.skipped[name], Version: -1}
		if len(adds) > 0 {
			v, err := commitTopic(ctx, j.root, name, adds, appID, version)
			if err != nil {
				return nil, err
			}
			res.Version = v
		}
		out[name] = res
	}
	return out, nil
}

func commitTopic(ctx context.Context, root storage.Store, name string, adds []delta.Add, appID string, version int64) (int64, error) {
	st := storage.Sub(root, name)
	meta, proto := topic.NewTableMetadata(name)
	if name == outbox.DeadLetterTopic {
		meta.SchemaString = topic.SchemaString(true)
	}
	if err := delta.CreateTable(ctx, st, meta, proto, nil); err != nil {
		return 0, fmt.Errorf("create topic %q table: %w", name, err)
	}
	if err := registerTopic(ctx, root, name); err != nil {
		return 0, err
	}
	tbl, err := delta.OpenTable(ctx, st, delta.Options{})
	if err != nil {
		return 0, fmt.Errorf("open topic %q table: %w", name, err)
	}
	if v, ok := tbl.TxnVersion(appID); ok && v >= version {
		return 0, fmt.Errorf("topic %q already records txn version %d for %s, at or past the snapshot's %d: the source's LSNs went backwards (restored or different database?); refusing to write", name, v, appID, version)
	}
	v, err := tbl.Commit(ctx, delta.CommitActions{
		Adds:      adds,
		Txn:       &delta.Txn{AppID: appID, Version: version},
		Operation: "WRITE",
	})
	if err != nil {
		return 0, fmt.Errorf("commit snapshot of topic %q (txn version %d): %w", name, version, err)
	}
	return v, nil
}

// registerTopic records the topic in the store's registry, as the relay
// does for the tables it creates (relay.ListTopics reads it).
func registerTopic(ctx context.Context, root storage.Store, name string) error {
	if err := root.Put(ctx, "_deltabus/topics/"+name, []byte(name+"\n")); err != nil {
		return fmt.Errorf("register topic %q: %w", name, err)
	}
	return nil
}

// writeMarker records that the slot exists and its snapshot is committed.
func writeMarker(ctx context.Context, store storage.Store, m relay.Marker) error {
	m.CreatedAt = time.Now().UTC()
	return relay.WriteMarker(ctx, store, m)
}
