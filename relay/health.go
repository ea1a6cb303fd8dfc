package relay

import (
	"fmt"
	"sync/atomic"
	"time"
)

// health is what /readyz reports: a session streams and, while events wait
// to be committed, commits keep succeeding.
type health struct {
	stall     time.Duration
	streaming atomic.Bool
	// lastProgress is when the relay last had nothing pending or last
	// committed a batch (unix nanoseconds).
	lastProgress atomic.Int64
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
