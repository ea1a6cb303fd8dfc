package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

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

// kv renders a string map in Arrow's JSON form for MAP columns.
func kv[V string | *string](m map[string]V) []map[string]any {
	out := make([]map[string]any, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, map[string]any{"key": k, "value": m[k]})
	}
	return out
}

// stateRows returns the checkpoint rows of snap other than files, in
// Arrow JSON form: protocol, metaData, txns and domains.
func stateRows(snap *Snapshot) []map[string]any {
	p, m := snap.Protocol, snap.Metadata
	rows := []map[string]any{{"protocol": map[string]any{
		"minReaderVersion": p.MinReaderVersion, "minWriterVersion": p.MinWriterVersion,
		"readerFeatures": p.ReaderFeatures, "writerFeatures": p.WriterFeatures}}}
	rows = append(rows, map[string]any{"metaData": map[string]any{
		"id": m.ID, "name": m.Name, "description": m.Description,
		"format":       map[string]any{"provider": m.Format.Provider, "options": kv(m.Format.Options)},
		"schemaString": m.SchemaString, "partitionColumns": nonNil(m.PartitionColumns),
		"configuration": kv(m.Configuration), "createdTime": m.CreatedTime}})
	for _, id := range slices.Sorted(maps.Keys(snap.Txns)) {
		t := snap.Txns[id]
		rows = append(rows, map[string]any{"txn": map[string]any{"appId": t.AppID, "version": t.Version, "lastUpdated": t.LastUpdated}})
	}
	for _, d := range slices.Sorted(maps.Keys(snap.Domains)) {
		rows = append(rows, map[string]any{"domainMetadata": snap.Domains[d]})
	}
	return rows
}

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
	state := stateRows(snap)
	js, err := json.Marshal(state)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("encode checkpoint rows: %w", err)
	}
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, checkpointSchema, bytes.NewReader(js))
	if err != nil {
		return nil, 0, 0, fmt.Errorf("build checkpoint record: %w", err)
	}
	defer rec.Release()
	adds := sortedAdds(snap.Files)
	removes := liveTombstones(snap, now)
	var buf bytes.Buffer
	// Column statistics only where a reader uses them (to skip the row
	// groups of tombstones): min/max of paths and stats strings would only
	// fatten the footer every load parses. No dictionaries: paths and
	// stats are unique, and a dictionary page is one more page (and
	// decoder) per column chunk for every load to read; the month
	// benchmark's checkpoints come out about as big (-4% to +3%).
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithCreatedBy("DeltaBus"), parquet.WithMaxRowGroupLength(1<<20),
		parquet.WithStats(false), parquet.WithStatsFor("remove.path", true),
		parquet.WithDictionaryDefault(false))
	w, err := pqarrow.NewFileWriter(checkpointSchema, &buf, props, pqarrow.DefaultWriterProps())
	if err != nil {
		return nil, 0, 0, fmt.Errorf("checkpoint writer: %w", err)
	}
	err = writeFileRows(w, rec, cpAdd, len(adds), func(sb *array.StructBuilder, i int) { appendAdd(sb, adds[i]) })
	if err == nil {
		err = writeFileRows(w, nil, cpRemove, len(removes), func(sb *array.StructBuilder, i int) { appendRemove(sb, &removes[i]) })
	}
	if err != nil {
		return nil, 0, 0, fmt.Errorf("write checkpoint: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, 0, 0, fmt.Errorf("close checkpoint: %w", err)
	}
	return buf.Bytes(), len(state) + len(adds) + len(removes), len(adds), nil
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
// copy of the values: a table's thousands of adds are not moved around
// whole by the sort.
func sortedAdds(files map[string]Add) []*Add {
	vals := slices.Collect(maps.Values(files))
	adds := make([]*Add, len(vals))
	for i := range vals {
		adds[i] = &vals[i]
	}
	slices.SortFunc(adds, func(a, b *Add) int { return strings.Compare(a.Path, b.Path) })
	return adds
}
