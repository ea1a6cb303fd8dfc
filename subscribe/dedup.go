package subscribe

// window remembers the last n event ids delivered: a ring of ids plus a
// count per id, so memory is O(n) whatever the stream (about 100 bytes per
// id: the string and a map entry). n = 0 disables it.
type window struct {
	ring  []string
	next  int
	count map[string]int
}

func newWindow(n int) *window {
	if n <= 0 {
		return nil
	}
	return &window{ring: make([]string, 0, n), count: make(map[string]int, n)}
}

func (w *window) contains(id string) bool { return w != nil && w.count[id] > 0 }

func (w *window) add(id string) {
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
