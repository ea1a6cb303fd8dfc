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

// commitParallelism is how many tables are committed at once: a commit
// mostly waits for the store (fsync locally, PUTs on S3), and the tables
// are independent. The topics of one group's table are committed one
// after the other: at once, they would only race for its versions.
const commitParallelism = 8

// commitTopics makes one Delta commit per topic holding all of the topic's
// snapshot files, in unit order, with the topic's txn{appId (appId/topic in
// a group's table), version}. A topic whose rows were all present already
// gets no commit. Which topics a failure leaves committed does not matter,
// as the bootstrap is done again (see Snapshot).
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
	groups, err := catalog.ListGroups(ctx, j.root)
	if err != nil {
		return nil, err
	}
	results := make(map[string]*TopicResult, len(names))
	byTable := map[string][]string{}
	var tables []string
	for _, name := range names {
		p := j.places.known(name)
		results[name] = &TopicResult{Added: j.added[name], Skipped: j.skipped[name], Version: -1, Table: p.Table}
		if byTable[p.Table] == nil {
			tables = append(tables, p.Table)
		}
		byTable[p.Table] = append(byTable[p.Table], name)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(commitParallelism)
	for _, table := range tables {
		g.Go(func() error {
			s := deltasink.New(j.root, deltasink.Options{AppID: appID, SyncCheckpoints: true})
			for _, name := range byTable[table] {
				adds := j.topicAdds(name)
				if len(adds) == 0 {
					continue
				}
				if err := checkPlaced(gctx, j.root, groups, j.places.known(name)); err != nil {
					return fmt.Errorf("commit snapshot: %w", err)
				}
				v, err := commitTopic(gctx, s, name, adds, version)
				if err != nil {
					return err
				}
				results[name].Version = v // each topic's result is written by its table's goroutine only
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := make(map[string]TopicResult, len(names))
	for name, r := range results {
		out[name] = *r
	}
	return out, nil
}

// topicAdds returns the topic's snapshot files in unit, then worker order.
func (j *copyJob) topicAdds(name string) []delta.Add {
	return sortedAdds(j.results[name])
}

func commitTopic(ctx context.Context, s *deltasink.Sink, name string, adds []delta.Add, version int64) (int64, error) {
	v, err := s.CommitFiles(ctx, name, adds, version)
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
