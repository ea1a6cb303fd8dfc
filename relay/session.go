package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/deltabus/deltabus/decoding"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pii"
)

// session is one replication connection's life: it streams from the slot's
// confirmed position, routes rows into batches and hands complete batches to
// the committer. Any error ends the session; Relay.Run decides whether to
// start a new one.
type session struct {
	r    *Relay
	conn replicationConn
	dec  *decoding.Decoder
	com  *committer

	topics     *topics
	pace       *pacer
	cur        *batch
	batchSeq   int64
	received   pglogrepl.LSN
	lastStatus time.Time
	ackedFrom  pglogrepl.LSN // the committer's durable position at the last status update
	// now is the time read once per turn of the receive loop: the batch
	// deadlines it decides are tens of milliseconds apart, and reading the
	// clock five times per message cost a tenth of the relay's CPU.
	now time.Time
	// retryAt and ackWake are the wake-ups while a due batch waits for the
	// committer and while the committer works (stepWake).
	retryAt time.Time
	ackWake time.Time
	// lastData is when the last data message arrived (the loop turn's
	// time): a backlog's batch closes once the stream is quiet (dueAt).
	lastData time.Time
	// quietMark is the last answer of quietAt.
	quietMark time.Time
	// serverEnd is the server's WAL end in the last keepalive: it sent
	// every change before it (advanceIdle).
	serverEnd pglogrepl.LSN
	// live judges the server's silence (liveness.go); got is set when a
	// message arrived, and the next loop turn records it.
	live liveness
	got  bool

	// view is the event being routed, read in place (outbox.View): it
	// is appended to the batch before the next message is read.
	view outbox.View
	// piiScratch is the Protector's work space (an encrypted payload).
	piiScratch pii.Scratch

	// tally counts the current transaction's rows, txPos is the
	// _transactions position of this source, recordsOff is set once a
	// transaction was held (txrecords.go).
	tally      txTally
	names      map[string]string // interned topic names of the tally
	txPos      int64
	txPosRead  bool
	recordsOff bool
	resolved   *resolver

	holds       holds
	contractGen uint64 // the registry's generation the contract holds were last checked at
	watermarks  []pendingWatermark
	forged      rateLimit // warnings about ignored watermarks
	deadLog     rateLimit // dead-letter log lines (the metric counts every one)

	// replayFrom is where the session began reading; replayDead the keys
	// of the dead letters _dead_letter holds from there on, read when a
	// replayed event first needs them (replay.go).
	replayFrom  pglogrepl.LSN
	deadThrough int64 // _dead_letter's position when the session began
	replayDead  map[deadLetterKey]bool
}

func newSession(r *Relay, conn replicationConn, com *committer, limit time.Duration) *session {
	dec := decoding.NewDecoder()
	dec.ReuseRows() // a row is routed into the batch before the next message
	now := time.Now()
	pace := newPacer(r.cfg)
	pace.state = newStatePace(r.cfg.StatePaceFiles, r.sink, r.log)
	s := &session{r: r, conn: conn, dec: dec, com: com, topics: newTopics(r, pace), pace: pace,
		cur: newBatch(r.sink, 0, com.durableLSN(), r.tracer), lastStatus: now, now: now, holds: holds{m: map[string]*hold{}},
		live: newLiveness(limit, now)}
	s.publishHeard()
	return s
}

// stream runs the receive loop until stop is closed (graceful: the current
// batch is committed and acknowledged) or an error occurs.
func (s *session) stream(ctx context.Context, stop <-chan struct{}) error {
	var stopping bool
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-stop:
			s.conn.Wake() // the receive loop sees stop at once, not at its next wake-up
		case <-done:
		}
	}()
	for {
		if err := s.com.failed(); err != nil {
			return err
		}
		if !stopping {
			select {
			case <-stop:
				stopping = true
			default:
				stopping = s.reachedStopAt()
			}
		}
		if stopping && !s.dec.InTransaction() {
			return s.finish(ctx)
		}
		if err := ctx.Err(); err != nil {
			return errors.New("shutdown timeout: the source transaction being received did not end in time; the open batch is discarded and read again on the next start")
		}
		s.now = time.Now()
		if s.got {
			s.got = false
			s.live.hear(s.now)
			if s.now.Sub(s.live.published) >= 100*time.Millisecond {
				s.publishHeard()
			}
		}
		if err := s.maybeHandoff(ctx, false); err != nil {
			return err
		}
		s.noteProgress()
		s.advanceIdle()
		if err := s.recheckContractHolds(ctx); err != nil {
			return err
		}
		if err := s.pollReleases(ctx); err != nil {
			return err
		}
		due := s.now.Sub(s.lastStatus) >= s.r.cfg.StatusInterval
		ask := s.live.askDue(s.now)
		if due || ask || s.com.durableLSN() != s.ackedFrom {
			// A commit made more durable: acknowledge it now, not at the
			// next interval, so the server frees its WAL (and sees the
			// slot caught up) within milliseconds of the commit.
			if err := s.sendStatusAsking(ctx, ask); err != nil {
				return err
			}
			if ask {
				s.live.didAsk(s.now)
			}
			if due {
				s.warnHeld()
			}
		}
		if err := s.receiveOne(ctx); err != nil {
			return err
		}
	}
}

// noteProgress tells the health check that nothing is waiting to be
// committed (an idle relay is not stalled).
func (s *session) noteProgress() {
	if s.cur.empty() && s.com.idle() {
		s.r.health.progress(s.now)
	}
}

// publishHeard gives the time the server was last heard from to /readyz
// and the metrics.
func (s *session) publishHeard() {
	s.live.published = s.live.heard
	s.r.health.heardFrom(s.live.heard, s.live.limit)
	s.r.metrics.heardFrom(s.live.heard)
}

// deadline is when the receive loop must wake up even without a message.
func (s *session) deadline() time.Time {
	d := s.lastStatus.Add(s.r.cfg.StatusInterval)
	if w := s.live.wakeAt(); w.Before(d) {
		d = w
	}
	if !s.cur.empty() {
		ready := s.dueAt()
		if s.batchFull() || s.now.After(ready) {
			// Waiting for the committer, which wakes the session when it
			// can take the batch (committer.free); this is a fallback.
			ready = stepWake(&s.retryAt, s.now, fallbackWake)
		}
		if ready.Before(d) {
			d = ready
		}
	}
	if !s.com.idle() {
		// A batch is being committed: the committer wakes the session when
		// it is durable, to acknowledge it; this is a fallback.
		if wake := stepWake(&s.ackWake, s.now, fallbackWake); wake.Before(d) {
			d = wake
		}
	}
	return d
}

// fallbackWake is how often the receive loop looks at a busy committer
// that should have woken it.
const fallbackWake = 50 * time.Millisecond

// stepWake returns a wake-up that moves by step once now reaches it, not
// on every message: each move resets the socket's read deadline.
func stepWake(at *time.Time, now time.Time, step time.Duration) time.Time {
	if !now.Before(*at) {
		*at = now.Add(step)
	}
	return *at
}

func (s *session) receiveOne(ctx context.Context) error {
	until := s.deadline()
	msg, err := s.conn.Receive(ctx, until)
	if err != nil {
		return fmt.Errorf("receive from replication stream: %w", err)
	}
	if msg == nil {
		// Nothing arrived by until. A receive with a deadline ahead read
		// whatever had arrived before waiting: a silence it saw.
		if until.After(s.now) && s.live.dead(s.now, time.Now()) {
			s.r.metrics.streamTimeout()
			return &StreamTimeoutError{Limit: s.live.limit}
		}
		return nil
	}
	s.got = true
	switch m := msg.(type) {
	case *pgproto3.CopyData:
		return s.handleCopyData(ctx, m.Data)
	case *pgproto3.ErrorResponse:
		return fmt.Errorf("replication stream: %w", pgconn.ErrorResponseToPgError(m))
	default:
		return nil
	}
}

func (s *session) handleCopyData(ctx context.Context, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		pkm, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return fmt.Errorf("parse keepalive: %w", err)
		}
		s.noteReceived(pkm.ServerWALEnd)
		// The server sent everything before ServerWALEnd: once all of it is
		// handled and durable (idle, now or after the batches in hand
		// commit: advanceIdle), the slot moves on to it, which keeps WAL
		// from piling up while other tables are busy and the outbox is
		// quiet.
		s.serverEnd = max(s.serverEnd, pkm.ServerWALEnd)
		s.advanceIdle()
		if !s.dec.InTransaction() {
			// A walsender sends a keepalive when it has caught up: a
			// backlog's last batch need not wait to fill (dueAt).
			s.lastData = time.Time{}
		}
		if pkm.ReplyRequested {
			return s.sendStatus(ctx)
		}
	case pglogrepl.XLogDataByteID:
		xld, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return fmt.Errorf("parse XLogData: %w", err)
		}
		s.lastData = s.now
		// A logical message's WALStart is the WAL position of what it
		// reports (a commit's: the end of its record); its length is
		// pgoutput's, not WAL. Adding it, as a physical stream may, took
		// the session past positions the server had not yet sent.
		s.noteReceived(xld.WALStart)
		msg, err := s.dec.Decode(xld.WALData)
		if err != nil {
			return fmt.Errorf("decode pgoutput at %s: %w", xld.WALStart, err)
		}
		return s.handle(ctx, msg)
	}
	return nil
}

func (s *session) noteReceived(lsn pglogrepl.LSN) {
	if lsn > s.received {
		s.received = lsn
		s.r.metrics.received(uint64(lsn))
	}
}

// advanceIdle moves the durable position to the server's WAL end of the
// last keepalive when the session is idle.
func (s *session) advanceIdle() {
	if s.serverEnd > s.com.durableLSN() && s.idle() {
		s.com.advance(s.serverEnd)
	}
}

// idle: no open transaction, nothing batched (carried rows included),
// nothing being committed.
func (s *session) idle() bool {
	return !s.dec.InTransaction() && s.cur.empty() && s.com.idle()
}

func (s *session) handle(ctx context.Context, msg decoding.Message) error {
	switch m := msg.(type) {
	case *decoding.Row:
		return s.route(ctx, m)
	case *decoding.Commit:
		if err := s.endTx(ctx, m); err != nil {
			return err
		}
		s.cur.commitTx(m.CommitLSN, m.EndLSN, m.CommitTime)
		if len(s.watermarks) > 0 {
			return s.applyWatermarks(ctx)
		}
		return s.maybeHandoff(ctx, false)
	case *decoding.LogicalMessage:
		s.noteMessage(m)
		if !m.Transactional && s.idle() {
			// A message outside any transaction (a heartbeat): everything
			// before it is handled and durable.
			s.com.advance(m.LSN)
		}
	case *decoding.Truncate:
		s.r.log.Warn("TRUNCATE of an outbox table: nothing to relay (events already streamed stay in their topics)",
			"tables", len(m.Relations), "commit_lsn", m.CommitLSN)
	}
	return nil // Begin and other messages: nothing to batch
}

func (s *session) batchFull() bool {
	c := s.r.cfg
	return s.cur.events >= c.BatchMaxEvents || s.cur.bytes >= c.BatchMaxBytes
}

// Catching up: when the batch's latest transaction committed more than
// catchUpLag ago the relay is reading a backlog, where a batch's delay
// costs no latency (its events are old already) and small batches cost a
// commit per topic each (most of the relay's CPU at small batches): a
// batch then closes when full or catchUpDelay old, or as soon as the
// stream has been quiet for quietAfter: the backlog is read, and waiting
// longer only delays its last events (up to a second at the end of every
// backlog, before).
const (
	catchUpLag   = 5 * time.Second
	catchUpDelay = time.Second
	// quietAfter is longer than the walsender's pauses inside a drain
	// (decoding a 1,000-row transaction before sending it takes a few
	// milliseconds, more on a loaded machine), so a flowing backlog still
	// makes large batches.
	quietAfter = 50 * time.Millisecond
	// quietStep rounds the quiet wake-up, so that the socket's read
	// deadline moves every quietStep while data flows, not per message.
	quietStep = 10 * time.Millisecond
)

// dueAt is when the current batch is due by time (not by size).
func (s *session) dueAt() time.Time {
	at := s.cur.wakeAt(s.r.cfg.BatchMaxDelay)
	if last := s.cur.lastTime; !last.IsZero() && s.now.Sub(last) > catchUpLag {
		late := s.cur.openedAt.Add(catchUpDelay)
		if quiet := s.quietAt(); quiet.Before(late) {
			late = quiet
		}
		if late.After(at) {
			at = late
		}
	}
	return at
}

// quietAt is when the stream will have been quiet for quietAfter since the
// last data message, or up to a quietStep later: the answer moves once per
// quietStep while data flows. It is asked for every message; rounding with
// Time.Truncate (a division of the wall clock) cost 1.5% of the relay's CPU.
func (s *session) quietAt() time.Time {
	at := s.lastData.Add(quietAfter)
	if s.lastData.IsZero() {
		return at // the walsender caught up (handleCopyData): quiet long ago
	}
	if at.After(s.quietMark) || s.quietMark.Sub(at) > quietStep {
		s.quietMark = at.Add(quietStep)
	}
	return s.quietMark
}

// maybeHandoff gives the current batch to the committer when it is due and
// ends on a transaction boundary; paced topics not yet allowed to commit
// are carried into the next batch (pacer). While the committer is busy the
// batch keeps growing (bounded memory: rows stream into files); past four
// times the limits, or when forced, it waits for the committer, and
// returns at once when the committer fails or ctx ends.
func (s *session) maybeHandoff(ctx context.Context, force bool) error {
	if s.dec.InTransaction() || s.cur.empty() {
		return nil
	}
	full := s.batchFull()
	if !force && !full && s.now.Before(s.dueAt()) {
		return nil
	}
	c := s.r.cfg
	mustWait := force || s.cur.events >= 4*c.BatchMaxEvents || s.cur.bytes >= 4*c.BatchMaxBytes
	for {
		if err := s.com.failed(); err != nil {
			return err
		}
		// Only the session submits: a free committer takes the batch
		// (group commit: it closes now, not when a timer fires).
		if s.com.free() {
			next, err := s.pace.split(s.r.sink, s.cur, time.Now(), force || full)
			if err != nil {
				return err
			}
			s.splitRecords(s.cur, next)
			if !s.com.trySubmit(s.cur) {
				next.abort()
				if err := s.com.failed(); err != nil {
					return err
				}
				return errors.New("the committer refused a batch while idle")
			}
			s.batchSeq++
			next.seq = s.batchSeq
			s.cur = next
			return nil
		}
		if !mustWait {
			return nil
		}
		if time.Since(s.lastStatus) >= c.StatusInterval {
			if err := s.sendStatus(ctx); err != nil {
				return err
			}
		}
		if err := s.com.waitIdle(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// finish commits what is batched, waits for it, and acknowledges it, up to
// the WAL end of the last keepalive when all of it is handled.
func (s *session) finish(ctx context.Context) error {
	if err := s.maybeHandoff(ctx, true); err != nil {
		return err
	}
	if err := s.awaitCommits(ctx); err != nil {
		return err
	}
	if err := s.com.close(); err != nil {
		return err
	}
	s.advanceIdle()
	if err := s.sendStatus(ctx); err != nil {
		return err
	}
	if e, ok := s.conn.(streamEnder); ok && s.r.cfg.StopAt != 0 {
		// --stop-at promises the slot at or past it when Run returns.
		return e.EndStream(ctx)
	}
	return nil
}

// awaitCommits waits for the batches handed over to be durable, sending a
// status update at least every StatusInterval and whenever a commit makes
// more durable. A commit of thousands of new tables can outlast
// wal_sender_timeout: a walsender that hears nothing that long ends the
// connection, and the final acknowledgement is lost (the relay exited 0
// with its slot behind --stop-at). When ctx ends it leaves the rest to
// committer.close, as before.
func (s *session) awaitCommits(ctx context.Context) error {
	for !s.com.idle() && ctx.Err() == nil {
		if time.Since(s.lastStatus) >= s.r.cfg.StatusInterval || s.com.durableLSN() != s.ackedFrom {
			if err := s.sendStatus(ctx); err != nil {
				return err
			}
		}
		if err := s.com.waitIdle(ctx, 50*time.Millisecond); err != nil && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

// reachedStopAt reports whether the session has received (or holds
// durable) everything before Config.StopAt, and logs it once.
func (s *session) reachedStopAt() bool {
	at := s.r.cfg.StopAt
	if at == 0 || max(s.received, s.com.durableLSN()) < at {
		return false
	}
	s.r.log.Info("reached --stop-at: committing what was received, then stopping", "stop_at", at, "received", s.received)
	return true
}

func (s *session) sendStatus(ctx context.Context) error { return s.sendStatusAsking(ctx, false) }

// sendStatusAsking sends a status update, asking the server for a reply
// when ask is set.
func (s *session) sendStatusAsking(ctx context.Context, ask bool) error {
	durable := s.com.durableLSN()
	s.ackedFrom = durable
	if h := s.holds.position(); h != 0 && h < durable {
		durable = h // a held topic must be able to re-read from its hold
	}
	if err := s.conn.SendStatus(ctx, max(s.received, durable), durable, ask); err != nil {
		return fmt.Errorf("send standby status: %w", err)
	}
	s.r.metrics.acknowledged(uint64(durable))
	s.resolved.note(durable)
	s.lastStatus = time.Now()
	return nil
}
