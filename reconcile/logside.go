package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// occCacheBudget bounds the occurred_at columns kept in memory per topic
// between the window pass and bisection (8 bytes per row).
const occCacheBudget = 32 << 20

// logFile is one active data file of a topic table or of a group's table.
type logFile struct {
	path       string // decoded, relative to the table root
	size       int64
	rows       int64 // numRecords from stats, -1 when absent
	lo, hi     int64 // every row's occurred_at (µs) is in [lo, hi) when bounded
	bounded    bool
	unreadable string // why the file cannot be read; "" when it can
	// source is the one source every row of the file names (its stats'
	// source bounds are equal, and no row lacks one); "" when the stats
	// cannot tell (several sources, rows of earlier releases).
	source string
	// topic is the one topic every row of the file names (its stats'
	// topic bounds are equal); "" when the stats cannot tell (a group
	// table's file of several topics, files of earlier releases).
	topic string
}

// topicLog is the log side of one topic: the active files, at one version
// of the table that holds it, that may hold its rows.
type topicLog struct {
	// ours says whether a row written by source (an appId; "" for rows of
	// releases that kept none) is this relay's: in a topic several sources
	// share, the others' events are neither expected nor unexpected. nil:
	// every row.
	ours  func(source string) bool
	topic string
	// table is the table that holds the topic; shared when it is a
	// group's, whose files mix topics: only rows whose topic column is
	// the topic count, and mixed files' columns are decoded once for all
	// the topics of a run (tableLog.split).
	table      *tableLog
	shared     bool
	store      storage.Store
	version    int64 // -1 when the topic has no table
	files      []*logFile
	cache      map[*logFile][]int64
	cacheBytes int64
}

// unreadableError marks a data file that is referenced but cannot be read.
type unreadableError struct{ path, why string }

func (e *unreadableError) Error() string { return fmt.Sprintf("data file %s: %s", e.path, e.why) }

func newLogFile(add delta.Add, sizes map[string]int64) *logFile {
	f := &logFile{size: add.Size, rows: -1}
	p, err := url.PathUnescape(add.Path)
	if err != nil {
		p = add.Path
	}
	f.path = p
	parseStats(f, add.Stats)
	switch size, ok := sizes[p]; {
	case strings.Contains(add.Path, "://"):
		f.unreadable = "absolute data file paths are not supported"
	case len(add.DeletionVector) > 0 && string(add.DeletionVector) != "null":
		f.unreadable = "deletion vectors are not supported"
	case !ok:
		f.unreadable = "referenced by an active add but missing from storage"
	case size != add.Size:
		f.unreadable = fmt.Sprintf("is %d bytes in storage, its add says %d", size, add.Size)
	}
	return f
}

// parseStats takes numRecords and the occurred_at bounds from add.stats.
// Bounds are widened to whole milliseconds so that writers that truncate
// timestamps to milliseconds are still enclosed.
func parseStats(f *logFile, stats string) {
	if stats == "" {
		return
	}
	var s struct {
		NumRecords *int64                     `json:"numRecords"`
		Min        map[string]json.RawMessage `json:"minValues"`
		Max        map[string]json.RawMessage `json:"maxValues"`
		Nulls      map[string]int64           `json:"nullCount"`
	}
	if json.Unmarshal([]byte(stats), &s) != nil {
		return
	}
	f.source = onlyValue(s.Min["source"], s.Max["source"], s.Nulls, "source")
	f.topic = onlyValue(s.Min["topic"], s.Max["topic"], s.Nulls, "topic")
	if s.NumRecords != nil {
		f.rows = *s.NumRecords
	}
	lo, okLo := statsTime(s.Min["occurred_at"])
	hi, okHi := statsTime(s.Max["occurred_at"])
	if okLo && okHi && f.rows >= 0 {
		f.lo = floorDiv(lo, 1000) * 1000
		f.hi = (floorDiv(hi, 1000)+1)*1000 + 1
		f.bounded = true
	}
}

// onlyValue returns the one value of a string column whose stats bound it
// to one value and count no null; "" when they do not.
func onlyValue(min, max json.RawMessage, nulls map[string]int64, col string) string {
	var lo, hi string
	if n, ok := nulls[col]; ok && n == 0 && json.Unmarshal(min, &lo) == nil && json.Unmarshal(max, &hi) == nil && lo == hi {
		return lo
	}
	return ""
}

func statsTime(raw json.RawMessage) (int64, bool) {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return 0, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, false
	}
	return t.UnixMicro(), true
}

func (f *logFile) overlaps(a, b int64) bool { return !f.bounded || (f.lo < b && f.hi > a) }

func (f *logFile) inside(a, b int64) bool { return f.bounded && f.lo >= a && f.hi <= b }

// whole reports whether the stats tell that every row of f is ours (and,
// in a group's table, of the topic), and none whether they tell that no
// row is ours.
func (tl *topicLog) whole(f *logFile) bool {
	return (tl.ours == nil || (f.source != "" && tl.ours(f.source))) && (!tl.shared || f.topic == tl.topic)
}

func (tl *topicLog) none(f *logFile) bool {
	return tl.ours != nil && f.source != "" && !tl.ours(f.source)
}

// read fetches the file and decodes its columns. A missing or corrupt file
// gives an *unreadableError; other errors (network, ctx) are returned as is.
func (tl *topicLog) read(ctx context.Context, f *logFile, withIDs bool) (*fileColumns, error) {
	var want func(source, topic string) bool
	if tl.ours != nil || tl.shared {
		want = tl.wants
	}
	return tl.readFile(ctx, f, withIDs, tl.shared, want)
}

// readFile is read with the topic column when withTopics, keeping the
// rows want accepts (all of them when want is nil).
func (tl *topicLog) readFile(ctx context.Context, f *logFile, withIDs, withTopics bool, want func(source, topic string) bool) (*fileColumns, error) {
	if f.unreadable != "" {
		return nil, &unreadableError{f.path, f.unreadable}
	}
	data, err := tl.store.Get(ctx, f.path)
	if errors.Is(err, storage.ErrNotFound) {
		f.unreadable = "referenced by an active add but missing from storage"
		return nil, &unreadableError{f.path, f.unreadable}
	}
	if err != nil {
		return nil, fmt.Errorf("read data file %s of topic %q (table %s): %w", f.path, tl.topic, tl.table.name, err)
	}
	cols, err := readColumns(ctx, data, withIDs, tl.ours != nil, withTopics)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		f.unreadable = "cannot be decoded: " + err.Error()
		return nil, &unreadableError{f.path, f.unreadable}
	}
	if f.rows >= 0 && int64(len(cols.occurred)) != f.rows {
		f.unreadable = fmt.Sprintf("holds %d rows, its add stats say %d", len(cols.occurred), f.rows)
		return nil, &unreadableError{f.path, f.unreadable}
	}
	if want != nil {
		cols.keep(want)
	}
	return cols, nil
}

// wants says whether a row of source and topic is one this log checks.
func (tl *topicLog) wants(source, topic string) bool {
	return tl.isOurs(source, topic) && (!tl.shared || topic == tl.topic)
}

// isOurs says whether a row of source is one this log checks, whatever
// its topic.
func (tl *topicLog) isOurs(source, _ string) bool { return tl.ours == nil || tl.ours(source) }

// occurred returns the file's occurred_at column, cached within budget.
func (tl *topicLog) occurred(ctx context.Context, f *logFile) ([]int64, error) {
	if tl.shared && f.topic == "" {
		return tl.table.occurred(ctx, tl, f)
	}
	if v, ok := tl.cache[f]; ok {
		return v, nil
	}
	cols, err := tl.read(ctx, f, false)
	if err != nil {
		return nil, err
	}
	if n := int64(len(cols.occurred)) * 8; tl.cacheBytes+n <= occCacheBudget {
		tl.cache[f] = cols.occurred
		tl.cacheBytes += n
	}
	return cols.occurred, nil
}

// countWindows counts events per window (bounds in µs, ascending, one more
// than windows). unreadable[i] lists the unreadable files overlapping
// window i; its count is then meaningless.
func (tl *topicLog) countWindows(ctx context.Context, bounds []int64) ([]int64, [][]string, error) {
	n := len(bounds) - 1
	counts := make([]int64, n)
	unreadable := make([][]string, n)
	for _, f := range tl.files {
		first, last := 0, n-1
		if f.bounded {
			first = max(sort.Search(len(bounds), func(i int) bool { return bounds[i] > f.lo })-1, 0)
			last = min(sort.Search(len(bounds), func(i int) bool { return bounds[i] >= f.hi })-1, n-1)
		}
		if first > last || (f.bounded && (f.hi <= bounds[0] || f.lo >= bounds[n])) || tl.none(f) {
			continue
		}
		if f.unreadable == "" && first == last && f.inside(bounds[first], bounds[first+1]) && tl.whole(f) {
			counts[first] += f.rows
			continue
		}
		occ, err := tl.occurred(ctx, f)
		var ue *unreadableError
		if errors.As(err, &ue) {
			for i := first; i <= last; i++ {
				unreadable[i] = append(unreadable[i], ue.Error())
			}
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		for _, v := range occ {
			if i := sort.Search(len(bounds), func(i int) bool { return bounds[i] > v }) - 1; i >= 0 && i < n {
				counts[i]++
			}
		}
	}
	return counts, unreadable, nil
}

// count counts events with occurred_at in [a, b) µs.
func (tl *topicLog) count(ctx context.Context, a, b int64) (int64, error) {
	var n int64
	for _, f := range tl.files {
		if !f.overlaps(a, b) || tl.none(f) {
			continue
		}
		if f.unreadable == "" && f.inside(a, b) && tl.whole(f) {
			n += f.rows
			continue
		}
		occ, err := tl.occurred(ctx, f)
		if err != nil {
			return 0, err
		}
		for _, v := range occ {
			if v >= a && v < b {
				n++
			}
		}
	}
	return n, nil
}

// logID is one event of the log: its id and occurred_at (µs).
type logID struct {
	id  string
	occ int64
}

// ids returns the events with occurred_at in [a, b), sorted by id.
func (tl *topicLog) ids(ctx context.Context, a, b int64) ([]logID, error) {
	var out []logID
	for _, f := range tl.files {
		if !f.overlaps(a, b) || tl.none(f) {
			continue
		}
		cols, err := tl.read(ctx, f, true)
		if err != nil {
			return nil, err
		}
		for i, v := range cols.occurred {
			if v >= a && v < b {
				out = append(out, logID{cols.ids[i], v})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out, nil
}
