package topic

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// DefaultSplitMemoryBytes is CompactOptions.SplitMemoryBytes's default.
const DefaultSplitMemoryBytes = 32 << 20

// appendRow makes a FileWriter the rowSink of a merge into one output.
func (w *FileWriter) appendRow(v *recordView, i int) error { return w.appendCopy(v, i) }

// splitClusters cuts a sorted run of a group table's files into the
// clusters a merge must take whole: files that may share a topic and whose
// ranges overlap (or touch) are in one cluster, so every cut leaves each
// topic's files before it entirely before its files after it, and each
// topic's outputs of one chunk never interleave with its files elsewhere.
// Files of different topics may overlap in different clusters: the
// per-topic outputs of an earlier run all span the same range. A file that
// shares no topic with any file overlapping it is marked to be drained
// (copied whole when the merge reaches it) instead of held open beside
// the others: only files that really interleave are merged row by row.
func splitClusters(run []inputFile) []int {
	reach := make([]int, len(run)) // the last file each must be merged with
	shared := make([]bool, len(run))
	var active []int // files whose range reaches the current file's start
	for j := range run {
		reach[j] = j
		keep := active[:0]
		for _, i := range active {
			if run[i].hi.cmp(run[j].lo) < 0 {
				continue // ended: so for every later file too
			}
			keep = append(keep, i)
			if mayShareTopic(run[i], run[j]) {
				reach[i], shared[i], shared[j] = j, true, true
			}
		}
		active = append(keep, j)
	}
	var lens []int
	start, far := 0, 0
	for i := range run {
		run[i].drain = !shared[i]
		if far = max(far, reach[i]); far == i {
			lens, start = append(lens, i+1-start), i+1
		}
	}
	return lens
}

// mayShareTopic reports whether two files' topic bounds intersect (files
// without bounds may hold any topic).
func mayShareTopic(a, b inputFile) bool {
	return !a.topics || !b.topics || (a.tlo <= b.thi && b.tlo <= a.thi)
}

// peakOpenSplit is peakOpen of a group table's cluster: drained files are
// open one at a time, after one another, so only the others count.
func peakOpenSplit(cl []inputFile) (files int, bytes int64) {
	var merged []inputFile
	for _, f := range cl {
		if !f.drain {
			merged = append(merged, f)
		}
	}
	return peakOpen(merged)
}

// withoutLoneFiles leaves out of a group table's chunk the files of one
// topic that no other file of the chunk may share a topic with: rewriting
// such a file would only copy it (the outputs of a run, one a topic, would
// otherwise be rewritten by every run after it). Leaving it in place puts
// no output of its topic around it: the chunk has no other rows of it.
func withoutLoneFiles(chunk []inputFile) []inputFile {
	single := map[string]int{} // files of exactly one topic, by topic
	var mixed []inputFile
	for _, f := range chunk {
		if f.topics && f.tlo == f.thi {
			single[f.tlo]++
		} else {
			mixed = append(mixed, f)
		}
	}
	if len(single) == 0 {
		return chunk
	}
	// Mixed files by lower topic bound, with the highest upper bound of
	// each prefix: a topic is in some mixed file's bounds when the prefix
	// of those starting at or below it reaches it.
	slices.SortFunc(mixed, func(a, b inputFile) int { return strings.Compare(a.tlo, b.tlo) })
	reach := make([]string, len(mixed))
	for i, f := range mixed {
		reach[i] = f.thi
		if i > 0 {
			reach[i] = max(reach[i-1], f.thi)
		}
		if !f.topics {
			reach[i] = "\U0010FFFF" // no bounds: any topic
		}
	}
	inMixed := func(topic string) bool {
		n, _ := slices.BinarySearchFunc(mixed, topic, func(f inputFile, t string) int {
			if !f.topics || f.tlo <= t {
				return -1
			}
			return 1
		})
		return n > 0 && reach[n-1] >= topic
	}
	kept := chunk[:0:0]
	for _, f := range chunk {
		lone := f.topics && f.tlo == f.thi && single[f.tlo] == 1 && !inMixed(f.tlo)
		if !lone {
			kept = append(kept, f)
		}
	}
	return kept
}

// topicSplit is the rowSink of a group table's compaction: each row goes
// to the writer of its topic, so every output file holds one topic (its
// stats' topic bounds are equal). Rows reach a topic's writer in merge
// order, so each topic keeps its order; topicSplit checks it, (commit_lsn,
// seq) per topic, since the cursors of a split check each file's order
// per topic only. Many writers are open at once: BoundPending keeps their
// memory under budget, writing the largest out first.
type topicSplit struct {
	store   storage.Store
	opts    FileOptions
	budget  int64
	writers map[string]*splitOut // by topic ("" for rows without one)
	rows    int
}

// splitOut is one topic's output and the position of its last row.
type splitOut struct {
	w    *FileWriter
	last pos
}

func newTopicSplit(store storage.Store, opts FileOptions, budget int64) *topicSplit {
	return &topicSplit{store: store, opts: opts, budget: budget, writers: map[string]*splitOut{}}
}

func (s *topicSplit) appendRow(v *recordView, i int) error {
	name := topicAt(v, i)
	at := pos{v.longs[colCommitLSN].Value(i), int64(v.ints[colSeq].Value(i))}
	o := s.writers[name]
	switch {
	case o == nil:
		o = &splitOut{w: NewFileWriter(s.store, s.opts)}
		s.writers[name] = o
	case at.cmp(o.last) < 0:
		return fmt.Errorf("rows of topic %q are not in (commit_lsn, seq) order across the files merged: (%d,%d) after (%d,%d)",
			name, at.lsn, at.seq, o.last.lsn, o.last.seq)
	}
	o.last = at
	if err := o.w.appendCopy(v, i); err != nil {
		return err
	}
	if s.rows++; s.rows&1023 != 0 {
		return nil
	}
	return BoundPending(s.budget, func(yield func(*FileWriter) bool) {
		for _, o := range s.writers {
			if !yield(o.w) {
				return
			}
		}
	})
}

// close finishes every output, topics in name order, and returns their
// adds: each topic's files together, in row order. On error the files
// already uploaded are deleted (best effort) and nothing is returned.
func (s *topicSplit) close(ctx context.Context) ([]delta.Add, error) {
	var adds []delta.Add
	for _, name := range slices.Sorted(maps.Keys(s.writers)) {
		w := s.writers[name].w
		a, err := w.Close(ctx)
		if err != nil {
			s.deleteUploaded(adds)
			return nil, fmt.Errorf("topic %q: %w", name, err)
		}
		adds = append(adds, a...)
	}
	return adds, nil
}

// abort discards every output not closed yet.
func (s *topicSplit) abort() {
	for _, o := range s.writers {
		o.w.Abort()
	}
}

// deleteUploaded deletes outputs that were uploaded (best effort).
func (s *topicSplit) deleteUploaded(adds []delta.Add) {
	(&FileWriter{store: s.store}).deleteUploaded(adds)
}
