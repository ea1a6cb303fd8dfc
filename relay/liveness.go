package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/pgsource"
)

// The replication stream's liveness. A connection can die without
// closing: a partition, a lost NAT or load-balancer entry, a frozen host
// or walsender. Nothing then arrives, no error either, and without a bound
// the relay would wait forever while the slot's WAL piles up.
//
// A healthy walsender sends data or a keepalive at least every half of its
// wal_sender_timeout once it has heard nothing from the client for that
// long; a client that keeps sending status updates, as the relay does
// every second, may hear nothing for longer from an idle server. So the
// session asks: once the stream has been silent for half the stream
// timeout it sends its status updates with reply requested (the protocol's
// standby status update flag; the walsender answers with a keepalive at
// once, between WAL records even while it decodes a large transaction),
// every quarter of the timeout until something arrives. When nothing has
// arrived for the whole stream timeout, after such a request had a quarter
// of it to be answered, the session is dead: it ends with a
// *StreamTimeoutError, Run logs it once, /readyz turns false, the
// connection is closed and a new session starts with backoff. An idle but
// healthy stream answers within a round trip and never reaches the bound.
//
// The stream timeout is 2 × the walsender's keepalive interval
// (wal_sender_timeout / 2), that is wal_sender_timeout itself, read at the
// start of every session on the relay's own connection (so a DSN's
// options=-c wal_sender_timeout=10s counts), with a floor of
// minStreamTimeout so that a tiny server setting does not make a loaded
// relay flap; 60 s when the server's timeout is disabled (0).
// Config.StreamTimeout overrides it.
//
// Only a silence the session saw while it waited counts: it judges after a
// receive that waited in vain, and a receive returns what arrived
// meanwhile before it waits, so time the loop spent elsewhere (waiting for
// a slow commit) never looks like a dead server.
//
// Nothing is lost or doubled by ending a session: the relay acknowledges
// only what is durable, so the new session re-reads from the slot's
// confirmed position and each topic skips what it already holds.
const (
	minStreamTimeout        = 10 * time.Second
	defaultWalSenderTimeout = time.Minute // assumed when the server's is disabled
)

// streamTimeout is the stream timeout for a server whose
// wal_sender_timeout is walSender (see above).
func streamTimeout(cfg Config, walSender time.Duration) time.Duration {
	if cfg.StreamTimeout > 0 {
		return cfg.StreamTimeout
	}
	if walSender <= 0 {
		walSender = defaultWalSenderTimeout
	}
	return max(walSender, minStreamTimeout)
}

// StreamTimeoutError ends a session whose replication stream was silent
// for the stream timeout, a reply having been asked for.
type StreamTimeoutError struct {
	Limit time.Duration
}

func (e *StreamTimeoutError) Error() string {
	return fmt.Sprintf("no message from PostgreSQL on the replication connection for %s, not even the reply it was asked for: the connection is dead (network partition, lost NAT or load-balancer entry, frozen server); closing it and reconnecting (--stream-timeout, default wal_sender_timeout)", e.Limit)
}

// liveness is a session's view of the server's silence.
type liveness struct {
	limit time.Duration
	heard time.Time // the loop turn after the last message from the server
	// asked is when the session first asked for a reply in the current
	// silence, askedLast the latest time; zero: not asked.
	asked, askedLast time.Time
	published        time.Time // the heard time last given to health and metrics
}

func newLiveness(limit time.Duration, now time.Time) liveness {
	return liveness{limit: limit, heard: now}
}

// hear records a message from the server, handled at the loop turn now.
func (l *liveness) hear(now time.Time) {
	l.heard = now
	l.asked, l.askedLast = time.Time{}, time.Time{}
}

// askDue reports whether the next status update should request a reply.
func (l *liveness) askDue(now time.Time) bool {
	if now.Sub(l.heard) < l.limit/2 {
		return false
	}
	return l.askedLast.IsZero() || now.Sub(l.askedLast) >= l.limit/4
}

func (l *liveness) didAsk(now time.Time) {
	if l.asked.IsZero() {
		l.asked = now
	}
	l.askedLast = now
}

// wakeAt is when the receive loop must look at the silence again.
func (l *liveness) wakeAt() time.Time {
	if l.asked.IsZero() {
		return l.heard.Add(l.limit / 2)
	}
	return l.askedLast.Add(l.limit / 4)
}

// dead reports whether a receive that began at waited (and found nothing
// until now) proves the session dead.
func (l *liveness) dead(waited, now time.Time) bool {
	return !l.asked.IsZero() && waited.Sub(l.asked) >= l.limit/4 && now.Sub(l.heard) >= l.limit
}

// endStale ends this process's previous replication connection when the
// server still holds the slot with it: a connection the relay declared
// dead (or closed over a broken network) lives on at the server until its
// wal_sender_timeout, or for hours when that is disabled, and the slot is
// busy meanwhile. The walsender is ours beyond doubt: the same backend
// pid, the same application_name, and this process has no other
// replication connection. A walsender that cannot be ended now (frozen:
// SIGSTOP) is tried again by the next session.
func (r *Relay) endStale(ctx context.Context, sql *pgx.Conn) {
	pid := r.lastWalsender
	if pid == 0 {
		return
	}
	app := sql.Config().RuntimeParams["application_name"]
	ended, err := pgsource.EndWalsender(ctx, sql, r.cfg.Slot, pid, app, 5*time.Second)
	switch {
	case err != nil:
		r.log.Warn("could not end this relay's previous replication connection, which PostgreSQL still holds; waiting for the server's wal_sender_timeout to end it",
			"walsender_pid", pid, "err", err)
	case ended:
		r.log.Warn("ended this relay's previous replication connection, which PostgreSQL still held", "walsender_pid", pid)
		r.lastWalsender = 0
	default: // gone by itself, or the slot is someone else's now
		r.lastWalsender = 0
	}
}
