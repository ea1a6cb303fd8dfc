package subscribe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/storage"
)

// StoreCheckpoints keeps checkpoints as small JSON objects in the DeltaBus
// store, at CheckpointKey(group, topic), for consumers without a database.
// The handler's effects and the checkpoint are not atomic: a crash between
// them delivers the last batch again (at least once). The store contract
// has no conditional overwrite, so Commit's check that the stored
// checkpoint is still prev is a read before the write: it catches a reset
// or a second consumer that already moved the checkpoint, not one racing
// within the same instant. Run one consumer per group.
type StoreCheckpoints struct {
	root storage.Store
}

// NewStoreCheckpoints returns checkpoints kept in root (the store root, as
// for the relay).
func NewStoreCheckpoints(root storage.Store) *StoreCheckpoints { return &StoreCheckpoints{root: root} }

var _ Checkpoints = (*StoreCheckpoints)(nil)

type checkpointJSON struct {
	Group     string    `json:"group"`
	Topic     string    `json:"topic"`
	Version   int64     `json:"version"`
	Offset    int64     `json:"offset"`
	TableID   string    `json:"table_id"`
	UpdatedAt time.Time `json:"updated_at"`
}

// maxCheckpointBytes bounds what Load reads: anything larger is not ours.
const maxCheckpointBytes = 64 << 10

// Load implements Checkpoints.
func (s *StoreCheckpoints) Load(ctx context.Context, group, topic string) (Checkpoint, bool, error) {
	key, err := CheckpointKey(group, topic)
	if err != nil {
		return Checkpoint{}, false, err
	}
	data, err := s.root.Get(ctx, key)
	if errors.Is(err, storage.ErrNotFound) {
		return Checkpoint{}, false, nil
	}
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("load checkpoint of group %q in topic %q: %w", group, topic, err)
	}
	c, err := decodeCheckpoint(data, group, topic)
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("checkpoint %s in %s is damaged: %w; reset the group (relay consume --from-version N)", key, s.root, err)
	}
	return c, true, nil
}

func decodeCheckpoint(data []byte, group, topic string) (Checkpoint, error) {
	if len(data) > maxCheckpointBytes {
		return Checkpoint{}, fmt.Errorf("%d bytes, more than a checkpoint can be", len(data))
	}
	var j checkpointJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return Checkpoint{}, err
	}
	switch {
	case j.Group != group || j.Topic != topic:
		return Checkpoint{}, fmt.Errorf("it names group %q topic %q", j.Group, j.Topic)
	case j.Version < 0 || j.Offset < 0:
		return Checkpoint{}, fmt.Errorf("negative position (version %d, offset %d)", j.Version, j.Offset)
	}
	return Checkpoint{Group: group, Topic: topic, Position: Position{j.Version, j.Offset}, TableID: j.TableID, UpdatedAt: j.UpdatedAt}, nil
}

// Commit implements Checkpoints: read and compare, apply (tx is nil), write.
func (s *StoreCheckpoints) Commit(ctx context.Context, prev *Checkpoint, next Checkpoint, apply func(context.Context, pgx.Tx) error) error {
	key, err := CheckpointKey(next.Group, next.Topic)
	if err != nil {
		return err
	}
	cur, ok, err := s.Load(ctx, next.Group, next.Topic)
	if err != nil {
		return err
	}
	var stored *Checkpoint
	if ok {
		stored = &cur
	}
	if !samePosition(stored, prev) {
		return fmt.Errorf("commit checkpoint of group %q in topic %q: %w", next.Group, next.Topic, ErrCheckpointMoved)
	}
	if apply != nil {
		if err := apply(ctx, nil); err != nil {
			return err
		}
	}
	data, err := json.Marshal(checkpointJSON{Group: next.Group, Topic: next.Topic, Version: next.Version,
		Offset: next.Offset, TableID: next.TableID, UpdatedAt: time.Now().UTC()})
	if err != nil {
		return err
	}
	if err := s.root.Put(ctx, key, data); err != nil {
		return fmt.Errorf("commit checkpoint of group %q in topic %q: %w", next.Group, next.Topic, err)
	}
	return nil
}

// List implements Checkpoints.
func (s *StoreCheckpoints) List(ctx context.Context) ([]Checkpoint, error) {
	objs, err := s.root.List(ctx, ConsumersPrefix, "")
	if err != nil {
		return nil, fmt.Errorf("list consumer checkpoints in %s: %w", s.root, err)
	}
	out := []Checkpoint{}
	for _, o := range objs {
		group, topic, ok := parseCheckpointKey(o.Key)
		if !ok {
			continue
		}
		c, found, err := s.Load(ctx, group, topic)
		if err != nil {
			return nil, err
		}
		if found {
			out = append(out, c)
		}
	}
	sortCheckpoints(out)
	return out, nil
}
