package subscribe

// DedupKey identifies an event across the sources of a shared topic: its
// source (the relay's appId) and its id. Two sources' events with one id
// are two events.
type DedupKey struct{ Source, ID string }

// DedupWindow remembers the last n events read: a ring of keys plus a
// count per key, so memory is O(n) whatever the stream (about 100 bytes per
// event: the strings and a map entry), grown as events come. A nil window
// (n = 0) remembers nothing. Subscribe's Options.Dedup and consumer
// groups' members use it.
type DedupWindow struct {
	ring  []DedupKey // grows to n
	n     int
	next  int
	count map[DedupKey]int
}

// NewDedupWindow returns a window of the last n keys; nil when n <= 0.
func NewDedupWindow(n int) *DedupWindow {
	if n <= 0 {
		return nil
	}
	return &DedupWindow{n: n, count: map[DedupKey]int{}}
}

// Contains reports whether k is among the last n keys added.
func (w *DedupWindow) Contains(k DedupKey) bool { return w != nil && w.count[k] > 0 }

// Add remembers k, forgetting the oldest key when n are held.
func (w *DedupWindow) Add(k DedupKey) {
	if w == nil {
		return
	}
	if len(w.ring) < w.n {
		w.ring = append(w.ring, k)
	} else {
		old := w.ring[w.next]
		if w.count[old]--; w.count[old] <= 0 {
			delete(w.count, old)
		}
		w.ring[w.next] = k
		w.next = (w.next + 1) % len(w.ring)
	}
	w.count[k]++
}
