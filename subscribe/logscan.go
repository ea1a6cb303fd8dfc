package subscribe

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// ErrRetentionPassed is wrapped by every RetentionError.
var ErrRetentionPassed = errors.New("retention passed this group's position")

// RetentionError says that the log no longer holds what a group needs next:
// the commits before Earliest were cleaned up, or a data file of Version was
// vacuumed after a compaction rewrote it. A subscription never jumps
// forward on its own.
type RetentionError struct {
	Group, Topic string
	Version      int64  // the group's position
	Earliest     int64  // earliest version the group could read incrementally
	Detail       string // what is gone, when more than commits
}

func (e *RetentionError) Error() string {
	detail := ""
	if e.Detail != "" {
		detail = ": " + e.Detail
	}
	return fmt.Sprintf("group %q topic %q: retention passed this group's position (version %d, earliest %d)%s; "+
		"reset the group to version %d or later to accept the gap (relay consume --topic %s --group %s --from-version %d), "+
		"or rebuild the consumer's output into a new table from a new group",
		e.Group, e.Topic, e.Version, e.Earliest, detail, e.Earliest, e.Topic, e.Group, e.Earliest)
}

func (e *RetentionError) Unwrap() error { return ErrRetentionPassed }

var (
	commitName     = regexp.MustCompile(`^(\d{20})\.json$`)
	checkpointName = regexp.MustCompile(`^(\d{20})\.checkpoint(\.\d{10}\.\d{10})?\.parquet$`)
)

// LogView is what one listing of a table's _delta_log shows.
type LogView struct {
	Commits     map[int64]storage.Object // commit files by version
	Checkpoints []int64                  // checkpoint versions, ascending (multi-part counted once per part set)
	First       int64                    // first commit version listed, -1 when none
	Last        int64                    // last commit version listed, -1 when none
	Earliest    int64                    // first commit or checkpoint version listed, -1 when none
}

// ListLog lists the _delta_log of the table tbl from version from
// (inclusive; 0 = the whole log) with startAfter, so the cost follows what
// lies after from, not the age of the table.
func ListLog(ctx context.Context, tbl storage.Store, from int64) (*LogView, error) {
	after := ""
	if from > 0 {
		after = fmt.Sprintf("%s%020d.json", delta.LogDir, from-1)
	}
	objs, err := tbl.List(ctx, delta.LogDir, after)
	if err != nil {
		return nil, fmt.Errorf("list %s%s: %w", tbl, "/"+delta.LogDir, err)
	}
	v := &LogView{Commits: map[int64]storage.Object{}, First: -1, Last: -1, Earliest: -1}
	for _, o := range objs {
		name := strings.TrimPrefix(o.Key, delta.LogDir)
		if m := commitName.FindStringSubmatch(name); m != nil {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			v.Commits[n] = o
			v.First, v.Last = minVersion(v.First, n), max(v.Last, n)
			v.Earliest = minVersion(v.Earliest, n)
		} else if m := checkpointName.FindStringSubmatch(name); m != nil {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			if len(v.Checkpoints) == 0 || v.Checkpoints[len(v.Checkpoints)-1] != n {
				v.Checkpoints = append(v.Checkpoints, n)
			}
			v.Earliest = minVersion(v.Earliest, n)
		}
	}
	return v, nil
}

func minVersion(cur, n int64) int64 {
	if cur < 0 || n < cur {
		return n
	}
	return cur
}

// CheckpointAfter returns the first checkpoint version > v, or -1.
func (l *LogView) CheckpointAfter(v int64) int64 {
	for _, c := range l.Checkpoints {
		if c > v {
			return c
		}
	}
	return -1
}

// readCommit reads and parses the commit file of version v.
func readCommit(ctx context.Context, tbl storage.Store, v int64) ([]delta.Action, error) {
	data, err := tbl.Get(ctx, delta.CommitKey(v))
	if err != nil {
		return nil, fmt.Errorf("read commit %d of %s: %w", v, tbl, err)
	}
	acts, err := delta.ParseCommit(data)
	if err != nil {
		return nil, fmt.Errorf("parse commit %d of %s: %w", v, tbl, err)
	}
	return acts, nil
}

// VersionTime returns the commit timestamp of version v: inCommitTimestamp,
// else commitInfo.timestamp, else the commit file's modification time.
func VersionTime(ctx context.Context, tbl storage.Store, v int64, mtime time.Time) (time.Time, error) {
	acts, err := readCommit(ctx, tbl, v)
	if err != nil {
		return time.Time{}, err
	}
	return commitTimestamp(acts, mtime), nil
}

// commitTimestamp is the commit's time (delta.CommitTime) from its actions.
func commitTimestamp(acts []delta.Action, mtime time.Time) time.Time {
	var ci *delta.CommitInfo
	for i := 0; i < len(acts) && ci == nil; i++ {
		ci = acts[i].CommitInfo
	}
	return delta.CommitTime(ci, mtime)
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
