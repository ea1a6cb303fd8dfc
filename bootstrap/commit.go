package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/deltasink"
	"github.com/deltabus/deltabus/storage"
)

// commitParallelism is how many topics are committed at once: a commit
// mostly waits for the store (fsync locally, PUTs on S3), and the topics'
// tables are independent.
const commitParallelism = 8

// commitTopics makes one Delta commit per topic holding all of the topic's
// snapshot files, in unit order, with txn{appID, version}. A topic whose
// rows were all present already gets no commit. Topics are committed
// commitParallelism at a time: which topics a failure leaves committed
// does not matter, as the bootstrap is done again (see Snapshot).
func (j *copyJob) commitTopics(ctx context.Context, appID string, version int64) (map[string]TopicResult, error) {
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
	results := make([]TopicResult, len(names))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(commitParallelism)
	for i, name := range names {
		adds := j.topicAdds(name)
		results[i] = TopicResult{Added: j.added[name], Skipped: j.skipped[name], Version: -1}
		if len(adds) == 0 {
			continue
		}
		g.Go(func() error {
			v, err := commitTopic(gctx, j.root, name, adds, appID, version)
			results[i].Version = v
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := make(map[string]TopicResult, len(names))
	for i, name := range names {
		out[name] = results[i]
	}
	return out, nil
}

// topicAdds returns the topic's snapshot files in unit, then worker order.
func (j *copyJob) topicAdds(name string) []delta.Add {
	files := j.results[name]
	slices.SortFunc(files, compareFiles)
	var adds []delta.Add
	for _, f := range files {
		adds = append(adds, f.adds...)
	}
	return adds
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
