package delta

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/deltabus/deltabus/storage"
)

// CreateTable writes version 0 (commitInfo, protocol, metaData) with
// PutIfAbsent. Empty meta.ID, format, configuration, partitionColumns and
// createdTime are filled in. ci may be nil for a default "CREATE TABLE"
// commitInfo.
//
// If the table already exists, CreateTable returns nil when its latest
// protocol, schemaString, partitionColumns and configuration equal the
// requested ones (an earlier or concurrent creation of the same table; the
// metaData id may differ), and an error wrapping ErrTableExists otherwise.
func CreateTable(ctx context.Context, store storage.Store, meta Metadata, proto Protocol, ci *CommitInfo) error {
	now := time.Now()
	fillMetadata(&meta, now)
	if err := validateNewTable(meta, proto); err != nil {
		return fmt.Errorf("create table %s: %w", store, err)
	}
	if ci == nil {
		var err error
		if ci, err = createCommitInfo(meta, now); err != nil {
			return fmt.Errorf("create table %s: %w", store, err)
		}
	}
	if ictEnabled(proto, meta) && ci.InCommitTimestamp == nil {
		ms := now.UnixMilli()
		ci.InCommitTimestamp = &ms
	}
	data, err := EncodeCommit([]Action{{CommitInfo: ci}, {Protocol: &proto}, {Metadata: &meta}})
	if err != nil {
		return fmt.Errorf("create table %s: %w", store, err)
	}
	err = store.PutIfAbsent(ctx, CommitKey(0), data)
	if err == nil {
		return nil
	}
	if !errors.Is(err, storage.ErrExists) {
		return fmt.Errorf("create table %s: %w", store, err)
	}
	snap, lerr := LoadSnapshot(ctx, store, -1)
	if lerr != nil {
		return fmt.Errorf("create table %s: exists but unreadable: %w: %w", store, ErrTableExists, lerr)
	}
	if diff := tableDiff(snap, meta, proto); diff != "" {
		return fmt.Errorf("create table %s: %w: %s", store, ErrTableExists, diff)
	}
	return nil
}

func fillMetadata(m *Metadata, now time.Time) {
	if m.ID == "" {
		m.ID = uuid.NewString()
	}
	if m.Format.Provider == "" {
		m.Format.Provider = "parquet"
	}
	if m.Format.Options == nil {
		m.Format.Options = map[string]string{}
	}
	if m.Configuration == nil {
		m.Configuration = map[string]string{}
	}
	if m.PartitionColumns == nil {
		m.PartitionColumns = []string{}
	}
	if m.CreatedTime == nil {
		ms := now.UnixMilli()
		m.CreatedTime = &ms
	}
}

func validateNewTable(m Metadata, p Protocol) error {
	schema, err := ParseSchema(m.SchemaString)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, f := range schema.Fields {
		if seen[strings.ToLower(f.Name)] {
			return fmt.Errorf("duplicate column %q (names are case-insensitive)", f.Name)
		}
		seen[strings.ToLower(f.Name)] = true
	}
	for _, c := range m.PartitionColumns {
		if _, ok := schema.Field(c); !ok {
			return fmt.Errorf("partition column %q is not in the schema", c)
		}
	}
	if err := checkProtocolConfig(p, m); err != nil {
		return err
	}
	return CheckWritable(p, m)
}

func createCommitInfo(m Metadata, now time.Time) (*CommitInfo, error) {
	pc := mustJSON(nonNil(m.PartitionColumns))
	return newCommitInfo(map[string]any{
		"operation":           "CREATE TABLE",
		"operationParameters": map[string]string{"partitionBy": pc, "isManaged": "false", "description": "", "properties": mustJSON(m.Configuration)},
		"isolationLevel":      "Serializable",
		"isBlindAppend":       true,
		"engineInfo":          defaultEngineInfo(),
	}, now.UnixMilli(), uuid.NewString())
}

// tableDiff describes how an existing table differs from the requested one.
func tableDiff(s *Snapshot, m Metadata, p Protocol) string {
	switch {
	case s.Protocol.MinReaderVersion != p.MinReaderVersion || s.Protocol.MinWriterVersion != p.MinWriterVersion ||
		!sameSet(s.Protocol.ReaderFeatures, p.ReaderFeatures) || !sameSet(s.Protocol.WriterFeatures, p.WriterFeatures):
		return fmt.Sprintf("protocol %+v, requested %+v", s.Protocol, p)
	case !SameSchema(s.Metadata.SchemaString, m.SchemaString):
		return "schema differs"
	case !slices.Equal(s.Metadata.PartitionColumns, m.PartitionColumns) &&
		len(s.Metadata.PartitionColumns)+len(m.PartitionColumns) > 0:
		return fmt.Sprintf("partition columns %v, requested %v", s.Metadata.PartitionColumns, m.PartitionColumns)
	case !maps.Equal(s.Metadata.Configuration, m.Configuration) &&
		len(s.Metadata.Configuration)+len(m.Configuration) > 0:
		return fmt.Sprintf("configuration %v, requested %v", s.Metadata.Configuration, m.Configuration)
	}
	return ""
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}
