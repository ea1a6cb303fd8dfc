package topic

import (
	"container/heap"
	"encoding/json"
	"slices"
	"strings"

	"github.com/deltabus/deltabus/sink/delta"
)

// inputFile is an active data file with what its stats say of it: its row
// count, bounds [lo, hi] on the (commit_lsn, seq) of its rows and bounds
// [tlo, thi] on their topics.
type inputFile struct {
	add      delta.Add
	rows     int64
	lo, hi   pos
	ok       bool // stats give all of the above but the topics
	tlo, thi string
	topics   bool // stats bound the topics of every row
	// drain: no other file of a group table's split may share a topic with
	// it and overlap its range, so the merge copies it whole (compact_split.go).
	drain bool
}

// fileStatsOf reads numRecords and the commit_lsn and seq bounds from an
// add's stats. When all rows share one commit_lsn the bounds are exact;
// otherwise seq is left unbounded at both ends.
func fileStatsOf(a delta.Add) inputFile {
	var s struct {
		NumRecords *int64
		MinValues  struct {
			CommitLSN *int64  `json:"commit_lsn"`
			Seq       *int64  `json:"seq"`
			Topic     *string `json:"topic"`
		}
		MaxValues struct {
			CommitLSN *int64  `json:"commit_lsn"`
			Seq       *int64  `json:"seq"`
			Topic     *string `json:"topic"`
		}
		NullCount map[string]int64
	}
	in := inputFile{add: a}
	if json.Unmarshal([]byte(a.Stats), &s) != nil || s.NumRecords == nil || s.MinValues.CommitLSN == nil ||
		s.MaxValues.CommitLSN == nil || s.NullCount["commit_lsn"] != 0 || s.NullCount["seq"] != 0 {
		return in
	}
	in.rows, in.ok = *s.NumRecords, true
	if lo, hi := s.MinValues.Topic, s.MaxValues.Topic; lo != nil && hi != nil && s.NullCount["topic"] == 0 {
		in.tlo, in.thi, in.topics = *lo, *hi, true
	}
	in.lo, in.hi = pos{*s.MinValues.CommitLSN, minSeq}, pos{*s.MaxValues.CommitLSN, maxSeq}
	if in.lo.lsn == in.hi.lsn && s.MinValues.Seq != nil && s.MaxValues.Seq != nil {
		in.lo.seq, in.hi.seq = *s.MinValues.Seq, *s.MaxValues.Seq
	}
	return in
}

// compactPlan is what Compact will rewrite: chunks of small files, one
// commit each, in (commit_lsn, seq) order.
type compactPlan struct {
	chunks  [][]inputFile
	skipped int // small files left alone (no usable stats, or merging them would hold too much at once)
}

// planCompaction orders the active files by their lower bound and cuts
// them into runs of consecutive small files (a large file, or one without
// usable stats, ends a run, so an output never spans a file it leaves in
// place). A run is cut into clusters of files whose ranges overlap, each
// merged whole (of a group's table: files that may share a topic and
// whose ranges overlap, splitClusters); clusters are packed into chunks of
// at most MaxCommitFiles files and MaxCommitBytes bytes. A chunk of fewer
// than MinFiles files is not worth a commit.
func planCompaction(files []delta.Add, o CompactOptions) compactPlan {
	all := make([]inputFile, len(files))
	for i, a := range files {
		all[i] = fileStatsOf(a)
	}
	slices.SortFunc(all, func(a, b inputFile) int {
		if c := a.lo.cmp(b.lo); c != 0 {
			return c
		}
		if c := a.hi.cmp(b.hi); c != 0 {
			return c
		}
		return strings.Compare(a.add.Path, b.add.Path)
	})
	var plan compactPlan
	var run []inputFile
	flush := func() {
		plan.addRun(run, o)
		run = nil
	}
	for _, f := range all {
		small := f.add.Size < o.SmallFileBytes
		switch {
		case small && f.ok:
			run = append(run, f)
		case small:
			plan.skipped++
			flush()
		default:
			flush()
		}
	}
	flush()
	return plan
}

// addRun splits a run into overlap clusters and packs them into chunks.
func (p *compactPlan) addRun(run []inputFile, o CompactOptions) {
	lens, open := clusters(run), peakOpen
	if o.SplitTopics {
		lens, open = splitClusters(run), peakOpenSplit
	}
	var chunk []inputFile
	var chunkBytes int64
	done := func() {
		if o.SplitTopics {
			chunk = withoutLoneFiles(chunk)
		}
		if len(chunk) >= o.MinFiles {
			p.chunks = append(p.chunks, chunk)
		}
		chunk, chunkBytes = nil, 0
	}
	for _, n := range lens {
		cl := run[:n]
		run = run[n:]
		files, bytes := open(cl)
		if files > o.MaxOpenFiles || bytes > o.MaxOpenBytes {
			p.skipped += n
			done() // a skipped cluster ends the chunk: outputs never span it
			continue
		}
		var clBytes int64
		for _, f := range cl {
			clBytes += f.add.Size
		}
		if len(chunk) > 0 && (len(chunk)+n > o.MaxCommitFiles || chunkBytes+clBytes > o.MaxCommitBytes) {
			done()
		}
		chunk = append(chunk, cl...)
		chunkBytes += clBytes
	}
	done()
}

// clusters returns the lengths of a sorted run's clusters, in order.
func clusters(run []inputFile) []int {
	var lens []int
	for i := 0; i < len(run); {
		n := clusterLen(run[i:])
		lens, i = append(lens, n), i+n
	}
	return lens
}

// clusterLen returns how many leading files of a sorted run form one
// cluster: each overlaps (or touches) the range of those before it.
func clusterLen(run []inputFile) int {
	hi := run[0].hi
	for i := 1; i < len(run); i++ {
		if run[i].lo.cmp(hi) > 0 {
			return i
		}
		if run[i].hi.cmp(hi) > 0 {
			hi = run[i].hi
		}
	}
	return len(run)
}

// endHeap holds the upper bounds of the files a merge has open.
type endHeap []inputFile

func (h endHeap) Len() int           { return len(h) }
func (h endHeap) Less(i, j int) bool { return h[i].hi.cmp(h[j].hi) < 0 }
func (h endHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endHeap) Push(x any)        { *h = append(*h, x.(inputFile)) }
func (h *endHeap) Pop() any {
	old := *h
	f := old[len(old)-1]
	*h = old[:len(old)-1]
	return f
}

// peakOpen returns the most files, and bytes, a merge of a sorted cluster
// holds open at once: a file is open from its lower to its upper bound.
func peakOpen(cl []inputFile) (files int, bytes int64) {
	h := &endHeap{}
	var open int64
	for _, f := range cl {
		for h.Len() > 0 && (*h)[0].hi.cmp(f.lo) < 0 {
			open -= heap.Pop(h).(inputFile).add.Size
		}
		heap.Push(h, f)
		open += f.add.Size
		files, bytes = max(files, h.Len()), max(bytes, open)
	}
	return files, bytes
}
