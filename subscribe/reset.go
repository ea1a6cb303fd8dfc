package subscribe

import (
	"context"
	"fmt"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// Reset moves the checkpoint of group in topic to start (a replay, or a
// jump forward the operator chose) and returns it. start is a version of
// the table holding the topic: its group's table for a topic of a group. A position the log no
// longer holds is refused with a RetentionError. The move is a
// compare-and-set on the checkpoint Reset read: a consumer of the group
// that is still running fails its next commit with ErrCheckpointMoved
// instead of overwriting the reset; stop it first.
func Reset(ctx context.Context, store storage.Store, cps Checkpoints, topic, group string, start Start) (Checkpoint, error) {
	if err := validTopic(topic); err != nil {
		return Checkpoint{}, err
	}
	if err := ValidGroup(group); err != nil {
		return Checkpoint{}, err
	}
	if cps == nil {
		cps = NewStoreCheckpoints(store)
	}
	p, err := catalog.Locate(ctx, store, topic)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("reset group %q in topic %q: %w", group, topic, err)
	}
	tbl := storage.Sub(store, p.Table)
	snap, err := delta.LoadSnapshot(ctx, tbl, -1)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("reset group %q in topic %q: %w", group, topic, err)
	}
	pos, err := resolveStart(ctx, tbl, start)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("reset group %q in topic %q to %s: %w", group, topic, start, err)
	}
	view, err := ListLog(ctx, tbl, 0)
	if err != nil {
		return Checkpoint{}, err
	}
	if view.First > pos.Version {
		return Checkpoint{}, &RetentionError{Group: group, Topic: topic, Version: pos.Version, Earliest: view.First}
	}
	cur, ok, err := cps.Load(ctx, group, topic)
	if err != nil {
		return Checkpoint{}, err
	}
	var prev *Checkpoint
	if ok {
		prev = &cur
	}
	next := Checkpoint{Group: group, Topic: topic, Position: pos, TableID: snap.Metadata.ID}
	if err := cps.Commit(ctx, prev, next, nil); err != nil {
		return Checkpoint{}, fmt.Errorf("reset group %q in topic %q: %w", group, topic, err)
	}
	return next, nil
}
