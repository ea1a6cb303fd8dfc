package relay

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/decoding"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// A row is one event or one dead letter, once. The stream judges a row
// when it reads it; read again after a restart (or a rewind), a row its
// topic's table already holds is skipped by position (step 3 of package
// catalog's argument), and so is a dead letter _dead_letter holds. But
// _dead_letter's position says nothing of the topics: a row dead-lettered
// in a transaction whose topic commit had not landed (or that had no row
// of the topic, so its position is older) comes back as a row of the
// topic, and is judged again. Judged again after its contract was fixed,
// or its mapping, it would pass and land in its topic beside its dead
// letter, and beside the event a redrive (package republish) published
// from that dead letter. So a replayed row of a transaction _dead_letter
// already holds, that _dead_letter holds itself (by source, commit LSN
// and seq), stays a dead letter: only a redrive brings it back.

// prepare readies a session before it reads a row: the breakers' holds
// (breaker.go), where the replay of this session begins and
// _dead_letter's position then.
func (s *session) prepare(ctx context.Context) error {
	s.replayFrom = s.com.durableLSN()
	t, err := s.topics.get(ctx, outbox.DeadLetterTopic)
	if err != nil {
		return err
	}
	s.deadThrough = t.through
	return s.restoreBreakerHolds(ctx)
}

// deadLetterKey identifies a row of this source in _dead_letter.
type deadLetterKey struct {
	lsn pglogrepl.LSN
	seq int32
}

// deadLettered reports whether a row routed as an event was dead-lettered
// when it was first read: its transaction is at or below _dead_letter's
// position and _dead_letter holds the row. The rows of _dead_letter past
// the session's start are read once, the first time a replayed event
// asks (rare: _dead_letter's position is past the start only when the
// last session's batch had dead letters).
func (s *session) deadLettered(ctx context.Context, row *decoding.Row) (bool, error) {
	if int64(row.CommitLSN) > s.deadThrough {
		return false, nil
	}
	if s.replayDead == nil {
		var err error
		if s.replayDead, err = s.readDeadLetters(ctx); err != nil {
			return false, err
		}
	}
	if !s.replayDead[deadLetterKey{row.CommitLSN, int32(row.Seq)}] {
		return false, nil
	}
	s.r.metrics.skipped()
	s.count(row, outbox.DeadLetterTopic)
	return true, nil
}

// readDeadLetters reads the keys of this source's dead letters committed
// at or after the session's start.
func (s *session) readDeadLetters(ctx context.Context) (map[deadLetterKey]bool, error) {
	st := storage.Sub(s.r.store, outbox.DeadLetterTopic)
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if errors.Is(err, delta.ErrNoTable) {
		return map[deadLetterKey]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the dead-letter table: %w", err)
	}
	appID, from := s.r.id.AppID, int64(s.replayFrom)
	ours := func(source string) bool { return source == appID || (source == "" && catalog.LegacyLayout(appID)) }
	out := map[deadLetterKey]bool{}
	for _, add := range snap.Files {
		if !topic.MayHoldLSNs(add.Stats, appID, from, math.MaxInt64) {
			continue
		}
		err := topic.ReadDeadLetters(ctx, st, add, func(d outbox.DeadLetter) error {
			if d.CommitLSN >= from && ours(d.Source) {
				out[deadLetterKey{pglogrepl.LSN(d.CommitLSN), d.Seq}] = true
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read the dead-letter table: %w", err)
		}
	}
	return out, nil
}
