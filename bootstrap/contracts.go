package bootstrap

import (
	"context"
	"errors"
	"fmt"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/deltasink"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/usererr"
)

// Event contracts on the snapshot paths. The first start's snapshot,
// `relay bootstrap --recover` and `relay rebuild` write events as the
// stream does, so they judge them as the stream does, with the same
// judgement (contract.Cache.Judge) and the same outcomes:
//
//   - a refused event goes to _dead_letter, with the violation as its
//     reason and the same dead letter the stream writes (its identity
//     deduplicates it against what _dead_letter holds);
//   - in a topic whose policy holds on violations, a refused event fails
//     the copy with one line and nothing is written: a snapshot has no
//     transaction order to hold a topic at, and the policy promises that
//     such an event goes nowhere until the registry admits it. The
//     operator registers a version that admits it, or changes the policy,
//     and runs the bootstrap again (a rebuild keeps its topic paused
//     meanwhile);
//   - a topic's strict policy refuses types without contracts.
//
// Events of topics without contracts or a policy are not judged at all:
// whether a topic has any is read once per unit and topic (governed), so
// a store without contracts costs the copy nothing per row.

// governed reports whether the copy judges the topic's events.
func (j *copyJob) governed(ctx context.Context, name string) (bool, error) {
	c := j.opts.Contracts
	if c == nil {
		return false, nil
	}
	ok, err := c.Governs(ctx, name)
	if err != nil {
		return false, fmt.Errorf("read the contracts of topic %q: %w", name, err)
	}
	return ok, nil
}

// judge judges an event of a governed topic; refused means it must not be
// appended: it went to _dead_letter, or err says why the copy stops.
func (w *unitWriter) judge(ev *outbox.Event) (refused bool, err error) {
	v, err := w.j.opts.Contracts.Judge(w.ctx, ev)
	switch {
	case err != nil:
		return true, fmt.Errorf("check event %s of topic %q against its contract: %w", ev.ID, ev.Topic, err)
	case v.Passes():
		return false, nil
	case v.Hold:
		return true, keepPaused{usererr.New(v.Violation,
			"event %s of topic %q breaks its contract (%v) and the topic holds on violations, so nothing is written: "+
				"register a contract version that admits it (relay contract register), or send such events to _dead_letter "+
				"(relay contract policy --topic %s --on-violation dead-letter), then run this again",
			ev.ID, ev.Topic, v.Violation, ev.Topic)}
	}
	return true, w.addDeadLetter(v.DeadLetter(ev, w.table))
}

// deadLettered is what _dead_letter holds of one topic from this source,
// for a rebuild: the ids of its events there (none of them goes into the
// topic too: an event is in its topic or in _dead_letter, never both) and
// the identities of its dead letters (one that is there already is not
// written again).
type deadLettered struct {
	events, letters *idSet
}

// deadLettersOf reads _dead_letter's rows of topic name written by this
// relay (appID): the files whose topic bounds may hold the topic only.
func deadLettersOf(ctx context.Context, root storage.Store, appID, name string) (deadLettered, error) {
	d := deadLettered{events: &idSet{txn: -1}, letters: &idSet{txn: -1}}
	st := storage.Sub(root, outbox.DeadLetterTopic)
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if errors.Is(err, delta.ErrNoTable) {
		return d, nil
	}
	if err != nil {
		return d, fmt.Errorf("read %s: %w", outbox.DeadLetterTopic, err)
	}
	ours := func(source string) bool { return source == appID || (source == "" && catalog.LegacyLayout(appID)) }
	for _, add := range snap.Files {
		if !topic.MayHold(add.Stats, name) {
			continue
		}
		err := topic.ReadDeadLetters(ctx, st, add, func(dl outbox.DeadLetter) error {
			if dl.Topic != name || !ours(dl.Source) {
				return nil
			}
			if k, ok := eventKey(dl.ID); ok {
				d.events.keys = append(d.events.keys, k)
			}
			d.letters.keys = append(d.letters.keys, deadLetterKey(dl.SourceTable, dl.RawRow))
			return nil
		})
		if err != nil {
			return d, fmt.Errorf("read the dead letters of topic %q: %w", name, err)
		}
	}
	d.events.sort()
	d.letters.sort()
	return d, nil
}

// commitDeadLetters commits a rebuild's new dead letters to _dead_letter
// as a blind append: their identity (deadLettersOf), not a txn position,
// keeps a rebuild run again from writing them twice, and the relay's own
// commits to _dead_letter commute with it.
func commitDeadLetters(ctx context.Context, root storage.Store, appID string, adds []delta.Add) error {
	if len(adds) == 0 {
		return nil
	}
	_, err := deltasink.New(root, deltasink.Options{AppID: appID, SyncCheckpoints: true}).AppendFiles(ctx, outbox.DeadLetterTopic, adds)
	return err
}
