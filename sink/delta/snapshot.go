package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"strconv"
	"time"

	"github.com/deltabus/deltabus/storage"
)

// ErrNoTable is returned when the store holds no Delta log.
var ErrNoTable = errors.New("delta: no table (no commits in _delta_log)")

// Snapshot is the reconciled state of a table at one version.
type Snapshot struct {
	Version           int64
	Protocol          Protocol
	Metadata          Metadata
	Files             map[string]Add            // active files by FileKey
	Tombstones        map[string]Remove         // removed files by FileKey; see LoadSnapshot
	Txns              map[string]Txn            // latest txn per appId
	Domains           map[string]DomainMetadata // live domains
	CommitInfo        *CommitInfo               // commitInfo of the Version commit, nil if absent
	CommitTime        time.Time                 // ICT, else commitInfo.timestamp, else commit file mtime
	CheckpointVersion int64                     // checkpoint replay started from, -1 for none

	// packedStats: the active files' statistics are packed (a Table's
	// state; see statspack.go): read them with statsOf.
	packedStats bool
}

// clone returns a copy whose maps can be read while s changes.
func (s *Snapshot) clone() *Snapshot {
	c := *s
	c.Files = maps.Clone(s.Files)
	c.Tombstones = maps.Clone(s.Tombstones)
	c.Txns = maps.Clone(s.Txns)
	c.Domains = maps.Clone(s.Domains)
	return &c
}

// NumTombstones returns the number of remove tombstones in the replay.
func (s *Snapshot) NumTombstones() int { return len(s.Tombstones) }

// Schema parses the snapshot's schemaString.
func (s *Snapshot) Schema() (*StructType, error) { return ParseSchema(s.Metadata.SchemaString) }

// FileKey is the reconciliation key of a file action: the path URL-decoded
// exactly once, plus the deletion vector's unique id when there is one.
func FileKey(path string, dv []byte) string {
	p, err := url.PathUnescape(path)
	if err != nil {
		p = path
	}
	if id := dvUniqueID(dv); id != "" {
		return p + "\x00" + id
	}
	return p
}

func newSnapshot() *Snapshot {
	return &Snapshot{
		Version: -1, CheckpointVersion: -1,
		Files: map[string]Add{}, Tombstones: map[string]Remove{},
		Txns: map[string]Txn{}, Domains: map[string]DomainMetadata{},
	}
}

// apply replays one action onto the snapshot.
func (s *Snapshot) apply(a *Action) {
	switch {
	case a.Protocol != nil:
		s.Protocol = *a.Protocol
	case a.Metadata != nil:
		s.Metadata = *a.Metadata
	case a.Add != nil:
		k := FileKey(a.Add.Path, a.Add.DeletionVector)
		s.Files[k] = *a.Add
		delete(s.Tombstones, k)
	case a.Remove != nil:
		k := FileKey(a.Remove.Path, a.Remove.DeletionVector)
		delete(s.Files, k)
		s.Tombstones[k] = *a.Remove
	case a.Txn != nil:
		s.Txns[a.Txn.AppID] = *a.Txn
	case a.Domain != nil:
		if a.Domain.Removed {
			delete(s.Domains, a.Domain.Domain)
		} else {
			s.Domains[a.Domain.Domain] = *a.Domain
		}
	}
}

// applyCommit replays one commit's actions and records its commitInfo.
func (s *Snapshot) applyCommit(v int64, acts []Action, mtime time.Time) {
	s.Version = v
	s.CommitInfo = nil
	for i := range acts {
		if acts[i].CommitInfo != nil && s.CommitInfo == nil {
			s.CommitInfo = acts[i].CommitInfo
		}
		s.apply(&acts[i])
	}
	s.CommitTime = CommitTime(s.CommitInfo, mtime)
}

// CommitTime is a commit's time: inCommitTimestamp, else commitInfo.timestamp, else mtime.
func CommitTime(ci *CommitInfo, mtime time.Time) time.Time {
	switch {
	case ci != nil && ci.InCommitTimestamp != nil:
		return time.UnixMilli(*ci.InCommitTimestamp).UTC()
	case ci != nil && ci.Timestamp != nil:
		return time.UnixMilli(*ci.Timestamp).UTC()
	}
	return mtime.UTC()
}

// LoadSnapshot reconstructs the table at version (-1 = latest) from the
// newest readable complete checkpoint at or before it plus the JSON commits
// after it. store is scoped to the table root. It refuses tables this reader
// cannot read correctly (CheckReadable).
//
// It is the readers' load: the checkpoint's tombstones, which only VACUUM
// and the next checkpoint need, are not read when they sit in row groups
// of their own (as this package writes them), so Tombstones holds the
// removes of the commits after the checkpoint, and a compacted table with
// a week of tombstones loads as fast as a small one. Writers (OpenTable)
// and Vacuum load every tombstone.
func LoadSnapshot(ctx context.Context, store storage.Store, version int64) (*Snapshot, error) {
	return loadSnapshot(ctx, store, version, slog.Default(), false)
}

func loadSnapshot(ctx context.Context, store storage.Store, version int64, log *slog.Logger, full bool) (*Snapshot, error) {
	snap, err := replaySnapshot(ctx, store, version, log, full)
	if err != nil {
		return nil, err
	}
	if err := CheckReadable(snap.Protocol, snap.Metadata); err != nil {
		return nil, err
	}
	return snap, nil
}

// replaySnapshot reconstructs the table at version without judging its
// protocol.
func replaySnapshot(ctx context.Context, store storage.Store, version int64, log *slog.Logger, full bool) (*Snapshot, error) {
	from := int64(0)
	if hint := readLastCheckpoint(ctx, store); hint != nil && (version < 0 || hint.Version <= version) {
		from = hint.Version
	}
	l, err := listLog(ctx, store, from)
	if err != nil {
		return nil, err
	}
	if from > 0 && !hasCheckpoint(l, from, version) {
		// Stale or wrong hint: the listing is the truth.
		if l, err = listLog(ctx, store, 0); err != nil {
			return nil, err
		}
	}
	if l.MaxVersion < 0 {
		return nil, ErrNoTable
	}
	if version < 0 {
		version = l.MaxVersion
	}
	if version > l.MaxVersion {
		return nil, fmt.Errorf("version %d does not exist; latest version is %d", version, l.MaxVersion)
	}
	snap, err := replayFrom(ctx, store, l, version, log, full)
	if err != nil && from > 0 {
		if l0, lerr := listLog(ctx, store, 0); lerr == nil {
			snap, err = replayFrom(ctx, store, l0, version, log, full)
		}
	}
	if err != nil {
		return nil, err
	}
	return snap, nil
}

func hasCheckpoint(l *logListing, v, target int64) bool {
	for _, c := range l.Checkpoints {
		if c.Version == v && (target < 0 || v <= target) {
			return true
		}
	}
	return false
}

// dvUniqueID is storageType + pathOrInlineDv (+ "@" + offset), or "".
func dvUniqueID(dv []byte) string {
	if len(dv) == 0 || string(dv) == "null" {
		return ""
	}
	var d struct {
		StorageType    string `json:"storageType"`
		PathOrInlineDv string `json:"pathOrInlineDv"`
		Offset         *int64 `json:"offset"`
	}
	if json.Unmarshal(dv, &d) != nil {
		return string(dv)
	}
	id := d.StorageType + d.PathOrInlineDv
	if d.Offset != nil {
		id += "@" + strconv.FormatInt(*d.Offset, 10)
	}
	return id
}
