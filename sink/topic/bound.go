package topic

import (
	"container/heap"
	"fmt"
	"iter"
)

// BoundPending keeps the memory of many writers (topics) under budget,
// whatever their number: while their pending rows and in-memory encoded
// files total more, it takes the writer holding the most and writes its
// in-memory files to the store (when they are the larger part), encodes
// its pending rows as a row group (128 KiB or more, which the next round may
// then write out), or stages fewer rows in a local temporary file until
// the writer next encodes (a tiny row group's Parquet metadata would cost
// more memory than its rows). Files smaller than 64 KiB are never written
// early, so a batch over a great many topics may exceed the budget by that
// much per topic rather than hold a temporary file for each. A writer
// holds at most two temporary files (a spilled file, its stage).
//
// It reads each writer's memory once per call and keeps them in a max-heap:
// a round changes only the writer it acts on, so the next largest is found
// in O(log n), not by scanning every writer again (a batch over 10,000
// topics, each round a full scan, spent minutes here; issue 30).
func BoundPending(budget int64, writers iter.Seq[*FileWriter]) error {
	var h byMemory
	var total int64
	for w := range writers {
		m := w.MemoryBytes()
		total += m
		h = append(h, held{w, m})
	}
	if total <= budget || len(h) == 0 {
		return nil
	}
	heap.Init(&h)
	for total > budget {
		largest := h[0].w
		acted, err := shrink(largest)
		if err != nil {
			return fmt.Errorf("bound memory of %s: %w", largest.store, err)
		}
		if !acted {
			return nil // only small in-memory files left: nothing worth a temporary file
		}
		m := largest.MemoryBytes()
		total += m - h[0].mem
		h[0].mem = m
		heap.Fix(&h, 0)
	}
	return nil
}

// shrink does BoundPending's one step on w, reporting false when nothing
// is worth doing.
func shrink(w *FileWriter) (bool, error) {
	pending, buffered := w.PendingBytes(), w.BufferedBytes()
	switch {
	case buffered >= pending && buffered >= minSpill:
		return true, w.SpillFiles()
	case pending >= minRowGroup:
		return true, w.FlushRowGroup()
	case pending > 0:
		return true, w.stageRows()
	default:
		return false, nil
	}
}

// held is a writer and its memory when last read.
type held struct {
	w   *FileWriter
	mem int64
}

// byMemory is a max-heap of writers by memory (container/heap).
type byMemory []held

func (h byMemory) Len() int           { return len(h) }
func (h byMemory) Less(i, j int) bool { return h[i].mem > h[j].mem }
func (h byMemory) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *byMemory) Push(x any)        { *h = append(*h, x.(held)) }
func (h *byMemory) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
