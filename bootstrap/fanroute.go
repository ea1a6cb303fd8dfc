package bootstrap

import (
	"cmp"
	"slices"
	"strings"
)

// Bounds of topicRoute's windows: the first is short so that an outbox
// of one or two topics soon goes back to chunks dealt in turn; they then
// double up to the largest.
const (
	routeFirstWindow = 2 << 20
	routeMaxWindow   = 32 << 20
	// routeMaxTopics bounds the route's table: past it rows are dealt in
	// turn.
	routeMaxTopics = 1 << 14
)

// topicRoute keeps every row of a topic on one worker of a fan-out, so
// each worker holds the pending rows of its share of the topics only:
// with many topics, row groups are larger and files fewer than when every
// worker meets every topic. A new topic goes to the worker that got the
// fewest bytes in the current window. At the end of each window the
// route checks the workers' loads: when one worker got more than 5/4 of
// its fair share, the topics are assigned again (largest first, to the
// least loaded worker, by their bytes in the window), and when even that
// assignment is that uneven (one topic is most of the rows) the next
// window's rows are dealt in turn instead (spread).
//
// Moving a topic between workers only starts it a file on its new worker:
// each worker's files hold their rows in stream order whatever the route.
type topicRoute struct {
	workers int
	of      map[string]*routedTopic
	topics  []*routedTopic
	load    []int64 // bytes each worker got in the window
	dealt   int64   // bytes in the window
	window  int64
	spread  bool // deal this window's rows in turn
}

// routedTopic is a topic's worker and its bytes in the window.
type routedTopic struct {
	worker int
	bytes  int64
}

func newTopicRoute(workers int) *topicRoute {
	return &topicRoute{workers: workers, of: map[string]*routedTopic{}, load: make([]int64, workers), window: routeFirstWindow}
}

// worker returns the worker of a tuple of size bytes whose topic column
// holds topic (nil for NULL); ok is false when the tuple is to be dealt
// in turn.
func (r *topicRoute) worker(topic []byte, size int) (k int, ok bool) {
	t := r.of[string(topic)]
	if t == nil {
		if len(r.topics) >= routeMaxTopics {
			return 0, false
		}
		t = &routedTopic{worker: slices.Index(r.load, slices.Min(r.load))}
		r.of[strings.Clone(string(topic))] = t
		r.topics = append(r.topics, t)
	}
	t.bytes += int64(size)
	r.load[t.worker] += int64(size)
	if r.dealt += int64(size); r.dealt >= r.window {
		r.rebalance()
	}
	return t.worker, !r.spread
}

// rebalance ends a window.
func (r *topicRoute) rebalance() {
	fair := r.dealt / int64(r.workers)
	if r.spread || slices.Max(r.load)*4 > fair*5 {
		load := make([]int64, r.workers)
		byBytes := slices.Clone(r.topics)
		slices.SortStableFunc(byBytes, func(a, b *routedTopic) int { return cmp.Compare(b.bytes, a.bytes) })
		for _, t := range byBytes {
			t.worker = slices.Index(load, slices.Min(load))
			load[t.worker] += t.bytes
		}
		r.spread = slices.Max(load)*4 > fair*5
	}
	for _, t := range r.topics {
		t.bytes = 0
	}
	clear(r.load)
	r.dealt = 0
	r.window = min(2*r.window, routeMaxWindow)
}
