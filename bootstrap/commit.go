package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/deltasink"
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
	v, err := deltasink.New(root, deltasink.Options{AppID: appID, SyncCheckpoints: true}).CommitFiles(ctx, name, adds, version)
	if errors.Is(err, sink.ErrFenced) {
		return 0, fmt.Errorf("%w; the source's LSNs went backwards (restored or different database?): refusing to write", err)
	}
	if err != nil {
		return 0, fmt.Errorf("commit snapshot of topic %q (txn version %d): %w", name, version, err)
	}
	return v, nil
}

// writeMarker records that the slot exists and its snapshot is committed.
func writeMarker(ctx context.Context, store storage.Store, m catalog.Marker) error {
	m.CreatedAt = time.Now().UTC()
	return catalog.WriteMarker(ctx, store, m)
}
