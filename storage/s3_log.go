package storage

import (
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// defaultRetryLogEvery is how often, at most, an S3 store logs a retried
// request after the first: during an outage every request of every writer
// fails, several times a second each.
const defaultRetryLogEvery = 10 * time.Second

// retryLog writes the warnings of retried S3 requests: the first at once,
// then at most one per interval, each with the number of failures left
// unlogged since the previous line; a timer reports a trailing count when
// no further failure comes to carry it. Safe for concurrent use.
type retryLog struct {
	l     *slog.Logger
	store string

	mu         sync.Mutex
	every      time.Duration
	last       time.Time // when the last line was written; zero = never
	suppressed int
	flush      *time.Timer // armed while suppressed > 0
}

func newRetryLog(l *slog.Logger, store string) *retryLog {
	if l == nil {
		l = slog.Default()
	}
	return &retryLog{l: l, store: store, every: defaultRetryLogEvery}
}

// failed records one failed attempt that is about to be retried.
func (r *retryLog) failed(resp *http.Response, err error) {
	r.mu.Lock()
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < r.every {
		r.suppressed++
		if r.flush == nil {
			r.flush = time.AfterFunc(r.last.Add(r.every).Sub(now), r.flushSuppressed)
		}
		r.mu.Unlock()
		return
	}
	n := r.take(now)
	r.mu.Unlock()
	attrs := []any{"store", r.store, "suppressed", n}
	switch {
	case err != nil:
		attrs = append(attrs, "error", err.Error())
	case resp != nil:
		attrs = append(attrs, "request", resp.Request.Method+" "+resp.Request.URL.Path, "status", resp.StatusCode)
	}
	r.l.Warn("s3 request failed; retrying", attrs...)
}

// take resets the count for a line written at now and returns it.
func (r *retryLog) take(now time.Time) int {
	n := r.suppressed
	r.suppressed, r.last = 0, now
	if r.flush != nil {
		r.flush.Stop()
		r.flush = nil
	}
	return n
}

// flushSuppressed runs when the interval after the last line ends with
// failures unlogged. A timer that take stopped too late finds a fresh line
// and does nothing.
func (r *retryLog) flushSuppressed() {
	r.mu.Lock()
	now := time.Now()
	if r.suppressed == 0 || now.Sub(r.last) < r.every {
		r.mu.Unlock()
		return
	}
	n := r.take(now)
	r.mu.Unlock()
	r.l.Warn("s3 request failures retried without a log line", "store", r.store, "suppressed", n, "interval", r.every.String())
}
