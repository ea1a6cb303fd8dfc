package contract

import (
	"context"
	"unsafe"

	"github.com/deltabus/deltabus/outbox"
)

// Verdict is what a topic's contracts make of one event where it becomes
// a row of the topic.
type Verdict struct {
	// Violation is why the event is refused; nil when it passes.
	Violation *Violation
	// Hold: the event is refused and its topic's policy holds on
	// violations: it goes nowhere (neither the topic nor _dead_letter),
	// and the topic waits for the registry to admit it.
	Hold bool
}

// Passes reports whether the event may enter its topic.
func (v Verdict) Passes() bool { return v.Violation == nil }

// DeadLetter returns the dead letter of a refused event, when the topic's
// policy sends refusals there (not Hold): the reason names the contract,
// the version and the first failing value. sourceTable is the outbox
// table's "schema.table".
func (v Verdict) DeadLetter(ev *outbox.Event, sourceTable string) *outbox.DeadLetter {
	return outbox.Refused(ev, v.Violation.Error(), sourceTable)
}

// Judge checks an event against its contract (Check) and its topic's
// policy. It is the one judgement of every path that writes events: the
// relay's stream, the first start's snapshot, `relay bootstrap --recover`
// and `relay rebuild` (package bootstrap), so an event refused on one is
// refused on every other, for the same reason, with the same dead letter.
// An error means the registry could not be read: the event is neither
// passed nor refused.
func (c *Cache) Judge(ctx context.Context, ev *outbox.Event) (Verdict, error) {
	v, err := c.Check(ctx, ev.Topic, ev.Type, ev.SchemaVersion, bytesOf(ev.Payload))
	if err != nil || v == nil {
		return Verdict{}, err
	}
	return Verdict{Violation: v, Hold: c.Policy(ev.Topic).Holds()}, nil
}

// Governs reports whether the registry, as the cache knows it, holds
// contracts or a policy for the topic; Judge passes events of any other
// topic without reading anything, so a writer may skip it for them.
// Reading the registry's index is the only I/O, once.
func (c *Cache) Governs(ctx context.Context, topic string) (bool, error) {
	if c.none.Load() {
		return false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.loadLocked(ctx); err != nil {
		return false, err
	}
	return c.topics[topic] != nil, nil
}

// bytesOf returns s's bytes without a copy; they must not be written.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
