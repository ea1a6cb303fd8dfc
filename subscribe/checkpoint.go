package subscribe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
)

// ErrCheckpointMoved is returned by Checkpoints.Commit when the stored
// checkpoint is no longer the one the caller started from: another consumer
// of the same group, or a Reset, moved it. Nothing was committed.
var ErrCheckpointMoved = errors.New("subscribe: checkpoint moved by someone else (another consumer of this group, or a reset)")

// ErrTableReplaced is wrapped by the error of a subscription whose topic
// table is not the one its position refers to (deleted and created again,
// or replaced): its versions mean something else now; reset the group.
var ErrTableReplaced = errors.New("the topic's table was replaced")

// Checkpoint is the position of a consumer group in a topic table.
type Checkpoint struct {
	Group    string
	Topic    string
	Position // next event to deliver
	// TableID is the Delta metaData.id of the table the position refers
	// to: a table deleted and recreated under the same topic starts its
	// versions again, and the position would mean something else.
	TableID   string
	UpdatedAt time.Time // when the checkpoint was committed (set by the store)
}

// Checkpoints stores one Checkpoint per (group, topic). Implementations:
// StoreCheckpoints (an object in the DeltaBus store) and pgcheckpoint.Store
// (a table in the consumer's PostgreSQL, committed in the handler's
// transaction). subscribe/checkpointtest is the conformance suite both pass.
type Checkpoints interface {
	// Load returns the checkpoint of (group, topic); ok is false when the
	// group has none for the topic.
	Load(ctx context.Context, group, topic string) (c Checkpoint, ok bool, err error)

	// Commit replaces the checkpoint prev (nil: there is none yet) of
	// (next.Group, next.Topic) by next. apply, when not nil, is the batch's
	// state change: it runs first and next is stored only when it returns
	// nil. A transactional store passes its transaction to apply and
	// commits both together (effectively once); the object store passes a
	// nil tx and stores next after apply returned (at least once). When
	// the stored checkpoint is not prev, Commit returns an error wrapping
	// ErrCheckpointMoved and stores nothing. next.UpdatedAt is set by the
	// store.
	Commit(ctx context.Context, prev *Checkpoint, next Checkpoint, apply func(ctx context.Context, tx pgx.Tx) error) error

	// List returns every checkpoint of the store, sorted by group, then topic.
	List(ctx context.Context) ([]Checkpoint, error)
}

// sortCheckpoints sorts by group, then topic.
func sortCheckpoints(cs []Checkpoint) {
	slices.SortFunc(cs, func(a, b Checkpoint) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Topic, b.Topic))
	})
}

// samePosition reports whether a stored checkpoint is still prev.
func samePosition(stored *Checkpoint, prev *Checkpoint) bool {
	if stored == nil || prev == nil {
		return stored == nil && prev == nil
	}
	return stored.Position == prev.Position && stored.TableID == prev.TableID
}

// ValidGroup reports whether name can be a consumer group: the rules of
// topic names (outbox.ValidTopic: 1 to 128 characters of [a-z0-9._-],
// starting with a letter or digit, no ".."), since a group is a path
// segment of the store too.
func ValidGroup(name string) error {
	err := outbox.ValidTopic(name)
	if err == nil {
		return nil
	}
	reason := strings.TrimPrefix(err.Error(), fmt.Sprintf("invalid topic name %q: ", name))
	return fmt.Errorf("invalid consumer group name %q: %s", name, strings.ReplaceAll(reason, "topic names", "group names"))
}

// validTopic accepts the topics a subscription can read: valid topic names
// and the dead-letter topic.
func validTopic(name string) error {
	if name == outbox.DeadLetterTopic {
		return nil
	}
	return outbox.ValidTopic(name)
}

// ConsumersPrefix is the store prefix under which StoreCheckpoints keeps
// one object per (group, topic) (see the store layout in package catalog).
const ConsumersPrefix = catalog.Prefix + "consumers/"

// CheckpointKey returns the store key of the checkpoint of group in topic:
// _deltabus/consumers/<group>/<topic>.json (catalog.KindConsumer). Both
// names are validated.
func CheckpointKey(group, topic string) (string, error) {
	if err := ValidGroup(group); err != nil {
		return "", err
	}
	if err := validTopic(topic); err != nil {
		return "", err
	}
	return catalog.Key(catalog.KindConsumer, group, topic)
}

// parseCheckpointKey is CheckpointKey's inverse; ok is false for keys that
// are not consumer checkpoints.
func parseCheckpointKey(key string) (group, topic string, ok bool) {
	kind, names, ok := catalog.Parse(key)
	if !ok || kind != catalog.KindConsumer || ValidGroup(names[0]) != nil || validTopic(names[1]) != nil {
		return "", "", false
	}
	return names[0], names[1], true
}
