package subscribe

// dedupKey identifies an event across the sources of a shared topic: its
// source (the relay's appId) and its id.
type dedupKey struct{ source, id string }

// window remembers the last n events delivered: a ring of keys plus a
// count per key, so memory is O(n) whatever the stream (about 100 bytes per
// event: the strings and a map entry). n = 0 disables it.
type window struct {
	ring  []dedupKey
	next  int
	count map[dedupKey]int
}

func newWindow(n int) *window {
	if n <= 0 {
		return nil
	}
	return &window{ring: make([]dedupKey, 0, n), count: make(map[dedupKey]int, n)}
}

func (w *window) contains(id dedupKey) bool { return w != nil && w.count[id] > 0 }

func (w *window) add(id dedupKey) {
	if w == nil {
		return
	}
	if len(w.ring) < cap(w.ring) {
		w.ring = append(w.ring, id)
	} else {
		old := w.ring[w.next]
		if w.count[old]--; w.count[old] <= 0 {
			delete(w.count, old)
		}
		w.ring[w.next] = id
		w.next = (w.next + 1) % len(w.ring)
	}
	w.count[id]++
}
