package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/decoding"
	"github.com/deltabus/deltabus/outbox"
)

// The circuit breaker: a topic whose rows are refused (sent to
// _dead_letter: its contract refuses them, its mapping cannot read them,
// its personal data cannot be protected) at more than Breaker.Rate of the
// rows of a Breaker.Window, once at least Breaker.Min were refused, holds
// instead of filling the dead-letter table: a producer that broke its
// events stops, the operator is told once, with why, and the events wait
// in the slot (held, as a missing table's are) to be read again once the
// cause is fixed and the operator releases the topic (`relay deadletter
// release`, catalog.Release). The rows of a window are counted by their
// source commit time, so a backlog read in a second is judged as the
// minute it was written in.
//
// While a topic is held by its breaker, _dead_letter is held from the
// same position too: its position is shared by every topic, and a dead
// letter of the held topic written after a later one of another topic
// would be skipped on the replay (it holds a position past it). So no
// dead letter is written past the oldest breaker hold; other topics'
// events stream on, their dead letters wait with the slot. A hold starts
// at a transaction boundary of both tables: when the transaction that
// trips it already put rows into the topic or _dead_letter in the open
// batch, the session rewinds (errRewind) and the next one holds from the
// transaction's first row (Relay.breakerHolds survive the rewind).
//
// The hold is recorded (catalog.HoldDeadLetterRate in the topic's
// RebuildState, which `relay status`, the operator's page and /metrics
// show; /readyz stays ready: a held topic is the relay doing its job) and
// re-established from the store by every session, so the refused events
// are never dead-lettered in the meantime, whatever restarts.

// Breaker configures the circuit breaker; the zero Breaker takes the
// defaults (20% of at least 100 refused rows in a minute).
type Breaker struct {
	// Rate is the share of a topic's rows in Window that may be refused;
	// 0 takes DefaultBreakerRate, negative turns the breaker off.
	Rate float64
	// Min is how many rows of a topic must be refused in Window before the
	// rate counts (a few bad rows of a quiet topic do not hold it).
	Min int
	// Window is the span of source commit time the rate is taken over.
	Window time.Duration
}

// Defaults of Breaker.
const (
	DefaultBreakerRate   = 0.2
	DefaultBreakerMin    = 100
	DefaultBreakerWindow = time.Minute
)

func (b Breaker) withDefaults() Breaker {
	if b.Rate == 0 {
		b.Rate = DefaultBreakerRate
	}
	if b.Min <= 0 {
		b.Min = DefaultBreakerMin
	}
	if b.Window <= 0 {
		b.Window = DefaultBreakerWindow
	}
	return b
}

func (b Breaker) on() bool { return b.Rate >= 0 }

func (b Breaker) validate() error {
	if b.Rate > 1 {
		return fmt.Errorf("--breaker-rate %g is above 1: give the share of a topic's rows that may be refused (0.2 = 20%%), or a negative value to turn the breaker off", b.Rate)
	}
	return nil
}

// maxBreakerTopics bounds the topics whose refusals are counted: topic
// values come from rows anyone writes.
const maxBreakerTopics = 10_000

// rateWindow counts one topic's rows and refusals over a sliding window:
// the current span (from start, unix nanoseconds of source commit time)
// and the one before it, weighted by how much of it the window still
// covers. Counting a row of the current span is a compare and an add.
type rateWindow struct {
	start              int64
	rows, refused      int
	prevRows, prevRefd int
	lastReason         string
}

// roll moves the window to at when at is past the current span.
func (w *rateWindow) roll(at time.Time, d time.Duration) {
	ns := at.UnixNano()
	age := ns - w.start
	if age >= 0 && age < int64(d) && w.start != 0 {
		return
	}
	switch {
	case w.start == 0 || age < 0:
		if w.start == 0 {
			w.start = ns
		}
		return // a commit time that went back counts in the current span
	case age < 2*int64(d):
		w.prevRows, w.prevRefd = w.rows, w.refused
		w.start += int64(d)
	default:
		w.prevRows, w.prevRefd = 0, 0
		w.start = ns
	}
	w.rows, w.refused = 0, 0
}

// estimate returns the rows and refusals of the window ending at at.
func (w *rateWindow) estimate(at time.Time, d time.Duration) (rows, refused float64) {
	left := 1 - float64(at.UnixNano()-w.start)/float64(d)
	left = min(max(left, 0), 1)
	return float64(w.rows) + left*float64(w.prevRows), float64(w.refused) + left*float64(w.prevRefd)
}

// breakerHold is a topic the breaker holds, from the commit of at.
type breakerHold struct {
	at  pglogrepl.LSN
	why string
}

// breaker is a session's view of the breakers: the rate of each topic met
// (kept by the Relay, so a rewind does not reset them), the release poll.
type breaker struct {
	cfg       Breaker
	lastPoll  time.Time
	lastDLTx  pglogrepl.LSN // commit LSN of the last dead letter put in the batch
	restored  bool
	disarmed  map[string]time.Time // topic -> breaker off until
	rates     map[string]*rateWindow
	pendingAt map[string]*breakerHold // trips waiting for the next session (a rewind)
}

func newBreaker(cfg Breaker) *breaker {
	return &breaker{cfg: cfg.withDefaults(), disarmed: map[string]time.Time{}, rates: map[string]*rateWindow{},
		pendingAt: map[string]*breakerHold{}}
}

// rate returns the topic's window, nil when the breaker is off or too many
// topics are counted already.
func (b *breaker) rate(topic string) *rateWindow {
	if !b.cfg.on() || outbox.ValidTopic(topic) != nil {
		return nil // internal topics (_dead_letter) have no breaker
	}
	w := b.rates[topic]
	if w == nil && len(b.rates) < maxBreakerTopics {
		w = &rateWindow{}
		b.rates[topic] = w
	}
	return w
}

// accept counts a row of t that became an event.
func (s *session) breakerAccept(t *topicView, row *decoding.Row) {
	if w := t.rate; w != nil {
		w.roll(row.CommitTime, s.r.breaker.cfg.Window)
		w.rows++
	}
}

// breakerRefuse counts a refused row (its dead letter dl) against its
// topic and trips the breaker when the topic's rate passes the limit:
// then the row is held, not dead-lettered (held=true), or the session
// rewinds to hold the topic from the row's transaction.
func (s *session) breakerRefuse(ctx context.Context, row *decoding.Row, dl *outbox.DeadLetter) (held bool, err error) {
	b := s.r.breaker
	if !b.cfg.on() || outbox.ValidTopic(dl.Topic) != nil {
		return false, nil
	}
	w := b.rate(dl.Topic)
	if w == nil {
		return false, nil
	}
	c := b.cfg
	w.roll(row.CommitTime, c.Window)
	w.rows++
	w.refused++
	w.lastReason = dl.Reason
	rows, refused := w.estimate(row.CommitTime, c.Window)
	if refused < float64(c.Min) || refused < c.Rate*rows || time.Now().Before(b.disarmed[dl.Topic]) {
		return false, nil
	}
	why := fmt.Sprintf("%.0f of its %.0f rows in %s were refused (more than %.0f%%, at least %d); the last: %s",
		refused, rows, c.Window, 100*c.Rate, c.Min, dl.Reason)
	h := &breakerHold{at: row.CommitLSN, why: why}
	b.pendingAt[dl.Topic] = h
	delete(b.rates, dl.Topic)
	s.r.metrics.breakerTripped(dl.Topic)
	if t := s.topics.m[dl.Topic]; b.lastDLTx == row.CommitLSN || (t != nil && t.lastTx == row.CommitLSN) {
		s.r.log.Warn("a topic's circuit breaker tripped in a transaction whose rows are already batched: re-reading the stream to hold the topic from that transaction",
			"topic", dl.Topic, "commit_lsn", row.CommitLSN)
		return true, errRewind
	}
	s.countHeld(row)
	return true, s.holdForBreaker(ctx, dl.Topic, h, true)
}

// holdForBreaker holds the topic, and _dead_letter, from h.at; record
// writes the hold to the store (a hold restored from it is not written
// again) and says why, once.
func (s *session) holdForBreaker(ctx context.Context, topic string, h *breakerHold, record bool) error {
	s.holds.add(topic, catalog.HoldDeadLetterRate, h.at)
	if d := s.holds.m[outbox.DeadLetterTopic]; d == nil || d.since > h.at {
		delete(s.holds.m, outbox.DeadLetterTopic)
		s.holds.add(outbox.DeadLetterTopic, catalog.HoldDeadLetterRate, h.at)
	}
	// Both tables' rows in the open batch are of transactions before the
	// hold's: they commit just below its position, not past it (step 7).
	below := s.r.positions.Pos(h.at) - 1
	s.cur.sb.Hold(topic, below)
	s.cur.sb.Hold(outbox.DeadLetterTopic, below)
	s.topics.forget(topic)
	s.r.metrics.paused(topic, uint64(h.at), true)
	delete(s.r.breaker.pendingAt, topic)
	if !record {
		return nil
	}
	st, _, err := catalog.ReadRebuildState(ctx, s.r.store, s.r.id.AppID, topic)
	if err != nil {
		return err
	}
	st.Paused, st.PausedAt, st.Last = catalog.HoldDeadLetterRate, h.at.String(), "circuit breaker: "+h.why
	if err := catalog.WriteRebuildState(ctx, s.r.store, st); err != nil {
		return err
	}
	s.r.log.Error("topic held by its circuit breaker: too many of its rows are refused, so its events are held and the slot is kept at this position instead of filling _dead_letter (dead letters of every topic wait with it; other topics' events stream on). "+
		"Fix the producer, its contract or the mapping, then `relay deadletter release --topic "+topic+"` (add --disarm 1h to let such rows go to _dead_letter meanwhile)",
		"topic", topic, "held_from", h.at, "why", h.why)
	return nil
}

// restoreBreakerHolds holds, before the session reads a row, the topics
// the store records as held by their breaker and those that tripped in a
// transaction the last session rewound.
func (s *session) restoreBreakerHolds(ctx context.Context) error {
	b := s.r.breaker
	b.lastDLTx = 0
	for topic, h := range b.pendingAt {
		if err := s.holdForBreaker(ctx, topic, h, true); err != nil {
			return err
		}
	}
	topics, err := catalog.StateTopics(ctx, s.r.store, s.r.id.AppID)
	if err != nil {
		return err
	}
	for _, topic := range topics {
		if s.holds.m[topic] != nil {
			continue
		}
		st, _, err := catalog.ReadRebuildState(ctx, s.r.store, s.r.id.AppID, topic)
		if err != nil {
			return err
		}
		if st.Paused == catalog.HoldDeadLetterRate {
			if err := s.holdForBreaker(ctx, st.Topic, &breakerHold{at: st.PausedAtLSN(), why: st.Last}, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// releasePoll is how often a session holding topics for their breaker
// looks for the operator's release.
const releasePoll = 2 * time.Second

// pollReleases lifts the breaker holds the operator released
// (catalog.Release), at a transaction boundary: what is batched is
// committed, the hold is recorded as lifted and the session rewinds to
// read the topic's events again from its hold.
func (s *session) pollReleases(ctx context.Context) error {
	b := s.r.breaker
	if s.dec.InTransaction() || s.now.Sub(b.lastPoll) < releasePoll {
		return nil
	}
	b.lastPoll = s.now
	released := false
	for topic, h := range s.holds.m {
		if h.id != catalog.HoldDeadLetterRate || topic == outbox.DeadLetterTopic {
			continue
		}
		rel, ok, err := catalog.ReadRelease(ctx, s.r.store, s.r.id.AppID, topic)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if rel.HeldAt != h.since.String() {
			continue // for an earlier hold
		}
		if !released {
			if err := s.drain(ctx); err != nil {
				return err
			}
			released = true
		}
		st, _, err := catalog.ReadRebuildState(ctx, s.r.store, s.r.id.AppID, topic)
		if err != nil {
			return err
		}
		st.Paused, st.PausedAt = "", ""
		st.Last = fmt.Sprintf("circuit breaker released by %s at %s", rel.Actor, rel.Created.Format(time.RFC3339))
		if d := rel.Disarm(); d > 0 {
			b.disarmed[topic] = time.Now().Add(d)
			st.Last += fmt.Sprintf(", disarmed for %s", d)
		}
		if err := catalog.WriteRebuildState(ctx, s.r.store, st); err != nil {
			return err
		}
		if err := catalog.DeleteRelease(ctx, s.r.store, s.r.id.AppID, topic); err != nil {
			s.r.log.Warn("could not delete a release the relay acted on (harmless: it names a hold that is gone)", "topic", topic, "err", err)
		}
		s.r.metrics.paused(topic, 0, false)
		s.r.log.Info("topic released from its circuit breaker; re-reading the stream from its hold", "topic", topic, "held_from", h.since,
			"by", rel.Actor, "disarm", rel.Disarm())
	}
	if !released {
		return nil
	}
	return errRewind
}

func (m *Metrics) breakerTripped(topic string) {
	if m != nil {
		m.breakerTrips.Add(context.Background(), 1, metric.WithAttributes(attribute.String("topic", topic)))
	}
}
