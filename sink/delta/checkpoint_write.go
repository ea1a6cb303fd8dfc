package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/deltabus/deltabus/coop"
	"github.com/deltabus/deltabus/parquetpage"
	"github.com/deltabus/deltabus/storage"
)

// checkpointSchema is the delta-spark checkpoint layout (delta-protocol.md
// §7): MAPs with a repeated key_value group, LISTs with list/element.
var checkpointSchema = func() *arrow.Schema {
	str := arrow.BinaryTypes.String
	i64 := arrow.PrimitiveTypes.Int64
	i32 := arrow.PrimitiveTypes.Int32
	boolean := arrow.FixedWidthTypes.Boolean
	f := func(name string, t arrow.DataType) arrow.Field {
		return arrow.Field{Name: name, Type: t, Nullable: true}
	}
	strMap := arrow.MapOf(str, str)
	strList := arrow.ListOfField(arrow.Field{Name: "element", Type: str, Nullable: true})
	dv := arrow.StructOf(f("storageType", str), f("pathOrInlineDv", str), f("offset", i32),
		f("sizeInBytes", i32), f("cardinality", i64), f("maxRowIndex", i64))
	return arrow.NewSchema([]arrow.Field{
		f("txn", arrow.StructOf(f("appId", str), f("version", i64), f("lastUpdated", i64))),
		f("add", arrow.StructOf(f("path", str), f("partitionValues", strMap), f("size", i64),
			f("modificationTime", i64), f("dataChange", boolean), f("tags", strMap), f("deletionVector", dv),
			f("baseRowId", i64), f("defaultRowCommitVersion", i64), f("stats", str))),
		f("remove", arrow.StructOf(f("path", str), f("deletionTimestamp", i64), f("dataChange", boolean),
			f("extendedFileMetadata", boolean), f("partitionValues", strMap), f("size", i64), f("deletionVector", dv),
			f("baseRowId", i64), f("defaultRowCommitVersion", i64))),
		f("metaData", arrow.StructOf(f("id", str), f("name", str), f("description", str),
			f("format", arrow.StructOf(f("provider", str), f("options", strMap))), f("schemaString", str),
			f("partitionColumns", strList), f("configuration", strMap), f("createdTime", i64))),
		f("protocol", arrow.StructOf(f("minReaderVersion", i32), f("minWriterVersion", i32),
			f("readerFeatures", strList), f("writerFeatures", strList))),
		f("domainMetadata", arrow.StructOf(f("domain", str), f("configuration", str), f("removed", boolean))),
	}, nil)
}()

// liveTombstones returns the removes of snap whose deletionTimestamp is
// inside delta.deletedFileRetentionDuration of now (a remove without one
// counts as removed at time 0), sorted by path.
func liveTombstones(snap *Snapshot, now time.Time) []Remove {
	cutoff := tombstoneCutoff(snap.Metadata, now)
	var out []Remove
	for _, r := range snap.Tombstones {
		if !r.expired(cutoff) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Remove) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// tombstoneCutoff is the deletionTimestamp (ms) at or before which a
// tombstone has expired.
func tombstoneCutoff(m Metadata, now time.Time) int64 {
	return now.Add(-Retention(m, PropDeletedFileRetention, DefaultDeletedFileRetention)).UnixMilli()
}

func (r *Remove) expired(cutoff int64) bool {
	return r.DeletionTimestamp == nil || *r.DeletionTimestamp <= cutoff
}

// expireTombstones forgets the tombstones no checkpoint keeps any more, so
// a long-running writer's state does not grow with every file a
// compaction ever removed.
func (s *Snapshot) expireTombstones(now time.Time) {
	cutoff := tombstoneCutoff(s.Metadata, now)
	for k, r := range s.Tombstones {
		if r.expired(cutoff) {
			delete(s.Tombstones, k)
		}
	}
}

// EncodeCheckpoint renders snap as a classic checkpoint parquet file and
// returns it with its number of action rows and active files. Rows, each
// holding one action: protocol, metaData, txns, domains, then the adds
// sorted by path; then the unexpired tombstones, sorted by path, in row
// groups of their own; file actions with dataChange=false; never
// commitInfo or cdc.
func EncodeCheckpoint(snap *Snapshot, now time.Time) (data []byte, rows, numAdds int, err error) {
	adds := sortedAdds(snap.Files)
	removes := liveTombstones(snap, now)
	s := cpShreds.Get().(*cpShred)
	defer func() {
		s.reset(0) // the pool keeps buffers, not this state's strings
		cpShreds.Put(s)
	}()
	var buf bytes.Buffer
	buf.Grow(64 * (len(adds) + len(removes)))
	// Column statistics only where a reader uses them (to skip the row
	// groups of tombstones): min/max of paths and stats strings would only
	// fatten the footer every load parses. No dictionaries: paths and
	// stats are unique, and a dictionary page is one more page (and
	// decoder) per column chunk for every load to read.
	f := parquetpage.NewFile(cpSchema, &buf)
	head := func(s *cpShred) { s.stateRows(snap) }
	rows, err = writeFileRows(f, s, head, len(adds), func(s *cpShred, i int) { s.addRow(adds[i], snap.statsOf(adds[i])) })
	if err == nil {
		var tombstones int
		tombstones, err = writeFileRows(f, s, nil, len(removes), func(s *cpShred, i int) { s.removeRow(&removes[i]) })
		rows += tombstones
	}
	if err != nil {
		return nil, 0, 0, fmt.Errorf("write checkpoint: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, 0, 0, fmt.Errorf("close checkpoint: %w", err)
	}
	return buf.Bytes(), rows, len(adds), nil
}

// WriteCheckpoint writes the classic checkpoint of snap (whose commit must
// already exist) and then _last_checkpoint. The checkpoint is a plain
// atomic Put (overwriting one with the same state is allowed). The hint
// never moves back to an older checkpoint: it is left alone when it
// already names this version or a later one, and when another writer's
// later checkpoint finished first and our hint overwrote its hint, the
// hint is pointed at the newest checkpoint again (each writer checks after
// its own write, so the last one to write leaves the newest).
func WriteCheckpoint(ctx context.Context, store storage.Store, snap *Snapshot, now time.Time) error {
	data, rows, adds, err := EncodeCheckpoint(snap, now)
	if err != nil {
		return fmt.Errorf("checkpoint version %d: %w", snap.Version, err)
	}
	if err := store.Put(ctx, CheckpointKey(snap.Version), data); err != nil {
		return fmt.Errorf("checkpoint version %d: %w", snap.Version, err)
	}
	if cur := readLastCheckpoint(ctx, store); cur != nil && cur.Version >= snap.Version {
		return nil
	}
	hint, _ := json.Marshal(map[string]int64{
		"version": snap.Version, "size": int64(rows), "sizeInBytes": int64(len(data)), "numOfAddFiles": int64(adds)})
	if err := store.Put(ctx, LastCheckpointKey, hint); err != nil {
		return fmt.Errorf("checkpoint version %d: _last_checkpoint: %w", snap.Version, err)
	}
	return pointHintAtNewest(ctx, store, snap.Version)
}

// pointHintAtNewest rewrites _last_checkpoint when a complete checkpoint
// newer than ours exists: its writer's hint may have been overwritten by
// ours.
func pointHintAtNewest(ctx context.Context, store storage.Store, ours int64) error {
	l, err := listLog(ctx, store, ours+1)
	if err != nil {
		return fmt.Errorf("checkpoint version %d: look for newer checkpoints: %w", ours, err)
	}
	if len(l.Checkpoints) == 0 || l.Checkpoints[len(l.Checkpoints)-1].Version <= ours {
		return nil
	}
	newest := l.Checkpoints[len(l.Checkpoints)-1]
	var rows int64
	for _, k := range newest.Keys {
		n, err := FooterNumRows(ctx, store, k)
		if err != nil {
			return fmt.Errorf("checkpoint version %d: read the newer checkpoint %s: %w", ours, k, err)
		}
		rows += n
	}
	h := map[string]int64{"version": newest.Version, "size": rows}
	if len(newest.Keys) > 1 {
		h["parts"] = int64(len(newest.Keys))
	}
	hint, _ := json.Marshal(h)
	if err := store.Put(ctx, LastCheckpointKey, hint); err != nil {
		return fmt.Errorf("checkpoint version %d: _last_checkpoint of version %d: %w", ours, newest.Version, err)
	}
	return nil
}

// sortedAdds returns the files sorted by path. It sorts pointers into one
// copy of the values, made in the map's order (a lookup of each path in
// turn costs more than the copy): a table's thousands of adds are not
// moved around whole by the sort. Copy and sort yield now and then
// (package coop): sorting a busy table's 30,000 paths takes over 10 ms of
// one P's time.
func sortedAdds(files map[string]Add) []*Add {
	var y coop.Yielder
	vals := make([]Add, 0, len(files))
	for _, a := range files {
		vals = append(vals, a)
		if len(vals)%addsPerYield == 0 {
			y.Yield()
		}
	}
	adds := make([]*Add, len(vals))
	for i := range vals {
		adds[i] = &vals[i]
	}
	n := 0
	slices.SortFunc(adds, func(a, b *Add) int {
		if n++; n%comparisonsPerYield == 0 {
			y.Yield()
		}
		return strings.Compare(a.Path, b.Path)
	})
	return adds
}

// addsPerYield and comparisonsPerYield space sortedAdds' yields at well
// under a millisecond of work each.
const (
	addsPerYield        = 1024
	comparisonsPerYield = 4096
)
