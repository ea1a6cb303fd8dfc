package delta

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/deltabus/deltabus/storage"
)

// LogDir is the key prefix of the Delta log inside a table root.
const LogDir = "_delta_log/"

var (
	commitRE     = regexp.MustCompile(`^(\d{20})\.json$`)
	checkpointRE = regexp.MustCompile(`^(\d{20})\.checkpoint\.parquet$`)
	multipartRE  = regexp.MustCompile(`^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$`)
)

// CommitKey returns the key of the commit file for version v.
func CommitKey(v int64) string { return fmt.Sprintf("%s%020d.json", LogDir, v) }

// CheckpointKey returns the key of the classic checkpoint for version v.
func CheckpointKey(v int64) string { return fmt.Sprintf("%s%020d.checkpoint.parquet", LogDir, v) }

// LastCheckpointKey is the key of the _last_checkpoint hint.
const LastCheckpointKey = LogDir + "_last_checkpoint"

// checkpointRef is one complete checkpoint found by listing.
type checkpointRef struct {
	Version int64
	Keys    []string // one for classic, parts in order for multi-part
}

// logListing is what a listing of _delta_log found.
type logListing struct {
	Commits     map[int64]storage.Object
	Checkpoints []checkpointRef // complete ones, ascending version
	MaxVersion  int64           // -1 when nothing was found
}

// listLog lists _delta_log from version from (inclusive) with the strict
// name patterns of delta-protocol.md §1; everything else is ignored.
func listLog(ctx context.Context, store storage.Store, from int64) (*logListing, error) {
	startAfter := ""
	if from > 0 {
		startAfter = fmt.Sprintf("%s%020d", LogDir, from)
	}
	objs, err := store.List(ctx, LogDir, startAfter)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", LogDir, err)
	}
	return parseListing(objs), nil
}

// parseListing sorts the objects of a _delta_log listing into commits and
// complete checkpoints.
func parseListing(objs []storage.Object) *logListing {
	l := &logListing{Commits: map[int64]storage.Object{}, MaxVersion: -1}
	parts := map[int64]map[int64]map[int64]string{} // version → parts total → part → key
	for _, o := range objs {
		name := strings.TrimPrefix(o.Key, LogDir)
		if m := commitRE.FindStringSubmatch(name); m != nil {
			v := atoi(m[1])
			l.Commits[v] = o
			l.MaxVersion = max(l.MaxVersion, v)
		} else if m := checkpointRE.FindStringSubmatch(name); m != nil {
			l.Checkpoints = append(l.Checkpoints, checkpointRef{Version: atoi(m[1]), Keys: []string{o.Key}})
		} else if m := multipartRE.FindStringSubmatch(name); m != nil {
			v, part, total := atoi(m[1]), atoi(m[2]), atoi(m[3])
			if part < 1 || part > total {
				continue
			}
			if parts[v] == nil {
				parts[v] = map[int64]map[int64]string{}
			}
			if parts[v][total] == nil {
				parts[v][total] = map[int64]string{}
			}
			parts[v][total][part] = o.Key
		}
	}
	for v, byTotal := range parts {
		for total, got := range byTotal {
			if int64(len(got)) != total {
				continue // incomplete multi-part checkpoint: ignored
			}
			ref := checkpointRef{Version: v}
			for p := int64(1); p <= total; p++ {
				ref.Keys = append(ref.Keys, got[p])
			}
			l.Checkpoints = append(l.Checkpoints, ref)
		}
	}
	sort.SliceStable(l.Checkpoints, func(i, j int) bool {
		a, b := l.Checkpoints[i], l.Checkpoints[j]
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return len(a.Keys) < len(b.Keys) // prefer classic at equal version
	})
	for _, c := range l.Checkpoints {
		l.MaxVersion = max(l.MaxVersion, c.Version)
	}
	return l
}

// earliestVersion returns the oldest version the listing can reconstruct:
// 0 when every commit from 0 to the latest is there, else the oldest
// complete checkpoint from which the commits run to the latest without a
// gap; -1 when there is none.
func (l *logListing) earliestVersion() int64 {
	low := l.oldestContiguousCommit()
	if low == 0 {
		return 0
	}
	for _, c := range l.Checkpoints {
		if c.Version >= low-1 {
			return c.Version
		}
	}
	return -1
}

// oldestContiguousCommit returns the oldest version from which commits run
// without a gap to the latest version (latest+1 when the latest version
// has no commit file).
func (l *logListing) oldestContiguousCommit() int64 {
	low := l.MaxVersion + 1
	for {
		if _, ok := l.Commits[low-1]; !ok {
			return low
		}
		low--
	}
}

// earliestChangeVersion returns the oldest version whose change feed can
// be read: its commit and every later one are there, and the snapshot at
// it can be reconstructed; -1 when there is none.
func (l *logListing) earliestChangeVersion() int64 {
	e := l.earliestVersion()
	if e < 0 {
		return -1
	}
	v := max(e, l.oldestContiguousCommit())
	if v > l.MaxVersion {
		return -1
	}
	return v
}

func atoi(s string) int64 {
	v, _ := strconv.ParseInt(s, 10, 64)
	return v
}

// LastCheckpoint is the _last_checkpoint hint. Only Version is relied on;
// the rest is informative.
type LastCheckpoint struct {
	Version       int64  `json:"version"`
	Size          int64  `json:"size"`
	Parts         *int64 `json:"parts,omitempty"`
	SizeInBytes   *int64 `json:"sizeInBytes,omitempty"`
	NumOfAddFiles *int64 `json:"numOfAddFiles,omitempty"`
}

// readLastCheckpoint returns the hint, or nil when it is missing, empty or
// does not parse: it is only a hint and listing is the truth.
func readLastCheckpoint(ctx context.Context, store storage.Store) *LastCheckpoint {
	data, err := store.Get(ctx, LastCheckpointKey)
	if err != nil {
		return nil
	}
	var lc struct {
		Version *int64 `json:"version"`
	}
	if json.Unmarshal(data, &lc) != nil || lc.Version == nil || *lc.Version < 0 {
		return nil
	}
	return &LastCheckpoint{Version: *lc.Version}
}
