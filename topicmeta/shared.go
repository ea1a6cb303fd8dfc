package topicmeta

import (
	"sort"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
)

// sharedIndex is what a group table's log says of each of its topics,
// built once per table from the add actions' statistics (numRecords and
// the topic column's bounds, which every file carries) and the txns: no
// data file is read.
type sharedIndex struct {
	alone map[string]int64 // records of the files holding one topic only, by topic
	// Files holding several topics (or without topic bounds: they may
	// hold any), as their bounds sorted, each with the records of it and
	// of every bound before it: the records of the files that may hold a
	// topic t are those with min ≤ t, less those with max < t.
	byMin, byMax []bound
	txns         map[string][]appTxn // by topic
}

type bound struct {
	topic string
	sum   int64 // records of this file and of every file before it
}

type appTxn struct {
	app string
	txn delta.Txn
}

func newSharedIndex(snap *delta.Snapshot) *sharedIndex {
	x := &sharedIndex{alone: map[string]int64{}, txns: map[string][]appTxn{}}
	type span struct {
		min, max string
		n        int64
	}
	var mixed []span
	for _, a := range snap.Files {
		n, _ := delta.StatsNumRecords(a.Stats)
		lo, hi, ok := topic.TopicBounds(a.Stats)
		switch {
		case !ok:
			mixed = append(mixed, span{"", "\U0010FFFF", n}) // no bounds: it may hold any topic
		case lo == hi:
			x.alone[lo] += n
		default:
			mixed = append(mixed, span{lo, hi, n})
		}
	}
	sums := func(key func(span) string) []bound {
		sort.Slice(mixed, func(i, j int) bool { return key(mixed[i]) < key(mixed[j]) })
		out := make([]bound, len(mixed))
		var sum int64
		for i, m := range mixed {
			sum += m.n
			out[i] = bound{key(m), sum}
		}
		return out
	}
	x.byMin = sums(func(s span) string { return s.min })
	x.byMax = sums(func(s span) string { return s.max })
	for id, txn := range snap.Txns {
		if app, topic, ok := catalog.SplitTxnAppID(id); ok {
			x.txns[topic] = append(x.txns[topic], appTxn{app, txn})
		}
	}
	return x
}

// records returns the records of the files holding only topic, and of
// the files holding other topics too that may hold it.
func (x *sharedIndex) records(topic string) (alone, shared int64) {
	upTo := func(bs []bound, n int) int64 {
		if n == 0 {
			return 0
		}
		return bs[n-1].sum
	}
	minAtMost := sort.Search(len(x.byMin), func(i int) bool { return x.byMin[i].topic > topic })
	maxBelow := sort.Search(len(x.byMax), func(i int) bool { return x.byMax[i].topic >= topic })
	return x.alone[topic], upTo(x.byMin, minAtMost) - upTo(x.byMax, maxBelow)
}

// sharedFields fills a grouped topic's own figures from its group table's
// index: records, last commit and sources.
func sharedFields(in *Info, t *loadedTable, ld *loader) {
	if t.shared == nil {
		t.shared = newSharedIndex(t.snap)
	}
	in.Records, in.SharedRecords = t.shared.records(in.Topic)
	in.Sources = []Source{}
	for _, at := range t.shared.txns[in.Topic] {
		in.Sources = append(in.Sources, ld.source(at.app, at.txn))
		if at.txn.LastUpdated != nil {
			if ts := time.UnixMilli(*at.txn.LastUpdated).UTC(); ts.After(in.LastCommit) {
				in.LastCommit = ts
			}
		}
	}
	sortSources(in.Sources)
}
