package relay

import (
	"fmt"
	"sync/atomic"
	"time"
)

// health is what /readyz reports: a session streams, the server was heard
// from within the stream timeout and, while events wait to be committed,
// commits keep succeeding.
type health struct {
	stall     time.Duration
	streaming atomic.Bool
	// lastProgress is when the relay last had nothing pending or last
	// committed a batch (unix nanoseconds).
	lastProgress atomic.Int64
	// heard is when the session last handled a message from the server
	// (unix nanoseconds, published every 100 ms at most); limit is the
	// session's stream timeout (nanoseconds).
	heard, limit atomic.Int64
}

// heardFrom records the session's stream timeout and the time it last
// heard from the server.
func (h *health) heardFrom(t time.Time, limit time.Duration) {
	h.heard.Store(t.UnixNano())
	h.limit.Store(int64(limit))
}

func (h *health) setStreaming(on bool) {
	if on {
		h.progress(time.Now())
	}
	h.streaming.Store(on)
}

func (h *health) progress(t time.Time) { h.lastProgress.Store(t.UnixNano()) }

func (h *health) ready(now time.Time) (bool, string) {
	if !h.streaming.Load() {
		return false, "not streaming (starting, or restarting after an error)"
	}
	if since := now.Sub(time.Unix(0, h.lastProgress.Load())); since > h.stall {
		return false, fmt.Sprintf("events pending and no commit succeeded for %s", since.Round(time.Second))
	}
	if limit := time.Duration(h.limit.Load()); limit > 0 {
		if silent := now.Sub(time.Unix(0, h.heard.Load())); silent > limit {
			return false, fmt.Sprintf("no message from PostgreSQL for %s (stream timeout %s): the replication connection is dead or stuck", silent.Round(time.Second), limit)
		}
	}
	return true, "streaming"
}

// rateLimit lets one event through per period and counts the others.
type rateLimit struct {
	last       time.Time
	suppressed int
}

// allow reports whether to act now, and how many were suppressed since the
// last time it did.
func (l *rateLimit) allow(period time.Duration) (int, bool) {
	if time.Since(l.last) < period {
		l.suppressed++
		return 0, false
	}
	n := l.suppressed
	l.last, l.suppressed = time.Now(), 0
	return n, true
}
