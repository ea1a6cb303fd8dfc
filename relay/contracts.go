package relay

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/decoding"
	"github.com/deltabus/deltabus/outbox"
)

// Event contracts (package contract): every event is checked against the
// contract of its (topic, type, schema_version) where the row becomes an
// event, after the topic's own checks and after the replay skip, by the
// judgement every path that writes events shares (contract.Cache.Judge;
// the snapshot paths of package bootstrap make the same). An event
// its contracts refuse (invalid, an unregistered version of a type that has
// contracts, a type without contracts in a strict topic) goes to
// _dead_letter with the violation as its reason, or, when the topic's
// policy is on-violation: hold, holds the topic as a missing table does:
// its events from the refused one's transaction on are dropped and the
// slot is kept there (completeness over progress), the other topics
// stream, and `relay status` says why. A held topic is checked again
// whenever the registry changes (contract.Cache.Generation): once the
// refused event passes, or the policy no longer holds, the hold lifts and
// the session rewinds to re-read the topic from its hold.
//
// A hold must start at a transaction boundary of its topic: when the
// refused event's transaction already put rows of the topic in the batch,
// those rows may not commit without the rest, so the session ends
// (errRewind) and the next one holds the topic from that transaction's
// first row. The pending hold (Relay.contractHolds) survives the rewind.
//
// The topic's rows of earlier transactions may be in the open batch (a
// busy committer, pacing: sink.Batch.Carry), which ends past the hold.
// Their commit records, as the topic's position, the hold's commit LSN
// minus one (sink.Batch.Hold), not the batch's:
// so the topic's position stays below the hold, and the rewind that lifts
// it reads the held transactions again instead of skipping them as held
// (catalog, steps 3 and 7).

// contractHold is a topic held for a refused event.
type contractHold struct {
	at      pglogrepl.LSN // commit LSN of the refused event's transaction
	why     string
	typ     string
	version int32
	payload []byte // a copy of the refused payload, checked again when the registry changes
}

// checkContract checks a routed event against its contract; handled means
// the event was dead-lettered or held (or the topic is held).
func (s *session) checkContract(ctx context.Context, row *decoding.Row, ev *outbox.Event, t *topicView) (handled bool, err error) {
	c := s.r.Contracts
	if h := s.r.contractHolds[ev.Topic]; h != nil && row.CommitLSN >= h.at {
		return true, s.holdForContract(ctx, ev.Topic, h)
	}
	v, err := c.Judge(ctx, ev)
	if err != nil {
		return true, fmt.Errorf("check event %s of topic %q against its contract: %w", ev.ID, ev.Topic, err)
	}
	if v.Passes() {
		if t.staleHold {
			t.staleHold = false
			return false, s.clearContractHold(ctx, ev.Topic, "its events pass their contracts again")
		}
		return false, nil
	}
	if !v.Hold {
		return true, s.deadLetter(ctx, row, v.DeadLetter(ev, row.Relation.Namespace+"."+row.Relation.Name))
	}
	// ev aliases the receive buffer: the hold keeps copies.
	h := &contractHold{at: row.CommitLSN, why: v.Violation.Error(), typ: strings.Clone(ev.Type), version: ev.SchemaVersion, payload: []byte(ev.Payload)}
	s.r.contractHolds[ev.Topic] = h
	if t.lastTx == row.CommitLSN {
		s.r.log.Warn("an event breaks its contract in a topic that holds on violations, after rows of the same transaction: re-reading the stream to hold the topic from that transaction",
			"topic", ev.Topic, "commit_lsn", row.CommitLSN, "why", h.why)
		return true, errRewind
	}
	return true, s.holdForContract(ctx, ev.Topic, h)
}

// holdForContract holds the topic at h (once per session) and records it.
func (s *session) holdForContract(ctx context.Context, topic string, h *contractHold) error {
	if s.holds.m[topic] != nil {
		s.r.metrics.skipped()
		return nil
	}
	s.holds.add(topic, catalog.HoldContract, h.at)
	// The topic's rows in the open batch are all of transactions before
	// the hold's: they commit at the position just below its position, not
	// past it.
	s.cur.sb.Hold(topic, s.r.positions.Pos(h.at)-1)
	s.r.metrics.paused(topic, uint64(h.at), true)
	s.r.metrics.skipped()
	st, _, err := catalog.ReadRebuildState(ctx, s.r.store, s.r.id.AppID, topic)
	if err != nil {
		return err
	}
	st.Paused, st.PausedAt, st.Last = catalog.HoldContract, h.at.String(), h.why
	if err := catalog.WriteRebuildState(ctx, s.r.store, st); err != nil {
		return err
	}
	s.r.log.Error("topic held: an event breaks its contract and the topic's policy is on-violation: hold; its events are held and the slot is kept at this position while the other topics stream. "+
		"Register a contract version that admits the event, or send such events to _dead_letter (relay contract policy --topic "+topic+" --on-violation dead-letter): the topic resumes within the registry's poll interval",
		"topic", topic, "held_from", h.at, "why", h.why)
	return nil
}

// clearContractHold records that the topic is no longer held for a
// contract.
func (s *session) clearContractHold(ctx context.Context, topic, what string) error {
	st, _, err := catalog.ReadRebuildState(ctx, s.r.store, s.r.id.AppID, topic)
	if err != nil || st.Paused != catalog.HoldContract {
		return err
	}
	st.Paused, st.PausedAt, st.Last = "", "", what
	s.r.metrics.paused(topic, 0, false)
	return catalog.WriteRebuildState(ctx, s.r.store, st)
}

// recheckContractHolds lifts the holds whose refused event the registry
// now admits (or whose topic no longer holds on violations), once the
// registry changed, at a transaction boundary; a lifted hold that was in
// force rewinds the session after what is batched is committed.
func (s *session) recheckContractHolds(ctx context.Context) error {
	c := s.r.Contracts
	if c == nil || len(s.r.contractHolds) == 0 || s.dec.InTransaction() {
		return nil
	}
	gen := c.Generation()
	if gen == s.contractGen {
		return nil
	}
	s.contractGen = gen
	rewind := false
	for topic, h := range s.r.contractHolds {
		v, err := c.Check(ctx, topic, h.typ, h.version, h.payload)
		if err != nil {
			return err
		}
		if v != nil && c.Policy(topic).Holds() {
			h.why = v.Error()
			continue
		}
		delete(s.r.contractHolds, topic)
		if s.holds.m[topic] == nil {
			continue // pending only: its events were not held yet
		}
		rewind = true
		what := "resumed: the registry admits the event it was held for"
		if v != nil {
			what = "resumed: its policy no longer holds on violations (such events go to _dead_letter)"
		}
		if err := s.clearContractHold(ctx, topic, what); err != nil {
			return err
		}
		s.r.log.Info("topic held for a contract violation resumes; re-reading the stream from its hold", "topic", topic, "held_from", h.at, "why", what)
	}
	if !rewind {
		return nil
	}
	if err := s.drain(ctx); err != nil {
		return err
	}
	return errRewind
}
