package storage

import (
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// defaultRetryLogEvery is how often, at most, an S3 store logs a failed
// request after the first: during an outage every request of every writer
// fails, several times a second each.
const defaultRetryLogEvery = 10 * time.Second

// retryLogMsg is the message of every line retryLog writes.
const retryLogMsg = "s3 request failed; retried while attempts remain"

// retryLog writes a warning per failed S3 request attempt: the first at
// once, then at most one per interval, each describing the latest failure
// and counting in "suppressed" the failures left unlogged since the
// previous line. A timer writes the line that closes an interval with
// unlogged failures, so no count is lost and, in an outage, one line per
// interval says the service still fails. Safe for concurrent use.
type retryLog struct {
	l     *slog.Logger
	store string

	mu         sync.Mutex
	every      time.Duration
	last       time.Time // when the last line was written; zero = never
	suppressed int       // failures since then, not logged
	latest     []any     // attributes of the latest unlogged failure
	flush      *time.Timer
}

func newRetryLog(l *slog.Logger, store string) *retryLog {
	return &retryLog{l: l, store: store, every: defaultRetryLogEvery}
}

// failed records one failed attempt.
func (r *retryLog) failed(resp *http.Response, err error) {
	attrs := failureAttrs(resp, err)
	r.mu.Lock()
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < r.every {
		r.suppressed++
		r.latest = attrs
		if r.flush == nil {
			r.flush = time.AfterFunc(r.last.Add(r.every).Sub(now), r.flushSuppressed)
		}
		r.mu.Unlock()
		return
	}
	n := r.take(now)
	r.mu.Unlock()
	r.write(attrs, n)
}

func failureAttrs(resp *http.Response, err error) []any {
	switch {
	case err != nil:
		return []any{"error", err.Error()}
	case resp != nil && resp.Request != nil:
		return []any{"request", resp.Request.Method + " " + resp.Request.URL.Path, "status", resp.StatusCode}
	case resp != nil:
		return []any{"status", resp.StatusCode}
	}
	return nil
}

func (r *retryLog) write(attrs []any, suppressed int) {
	r.l.Warn(retryLogMsg, append([]any{"store", r.store, "suppressed", suppressed}, attrs...)...)
}

// take starts a new interval at now and returns the failures left
// unlogged in the previous one.
func (r *retryLog) take(now time.Time) int {
	n := r.suppressed
	r.suppressed, r.latest, r.last = 0, nil, now
	if r.flush != nil {
		r.flush.Stop()
		r.flush = nil
	}
	return n
}

// flushSuppressed runs when an interval with unlogged failures ends: it
// logs the latest of them. A timer that take stopped too late finds a
// fresh interval and does nothing.
func (r *retryLog) flushSuppressed() {
	r.mu.Lock()
	now := time.Now()
	if r.suppressed == 0 || now.Sub(r.last) < r.every {
		r.mu.Unlock()
		return
	}
	attrs := r.latest
	n := r.take(now)
	r.mu.Unlock()
	r.write(attrs, n-1)
}
