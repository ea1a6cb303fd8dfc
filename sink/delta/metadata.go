package delta

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/google/uuid"
)

// errNoChange ends a metaData update that has nothing left to change.
var errNoChange = errors.New("metaData unchanged")

// MetadataChange is one metaData commit: Update edits a copy of the
// table's current metaData; Operation and OperationParameters go to
// commitInfo (operationParameters values are JSON-encoded strings, as
// delta-spark writes them).
type MetadataChange struct {
	Operation           string // e.g. "SET TBLPROPERTIES", "ADD COLUMNS"
	OperationParameters map[string]string
	Update              func(*Metadata) error
}

// UpdateMetadata commits a metaData change made by ch.Update on a copy of
// the current metaData, and returns the version. The change must keep the
// table id and partition columns and may only append nullable columns to
// the schema; the result must pass the same checks as a new table
// (CheckWritable included). A change that leaves the metaData as it is
// commits nothing and returns the current version.
//
// The commit holds commitInfo and the metaData. On a lost race Update runs
// again on the winner's metaData, so a concurrent compatible change is
// never undone; a winner this handle cannot follow stops it
// (IncompatibleChangeError). Blind appends and compactions never conflict
// with it: their files stay valid under an appended nullable column.
func (t *Table) UpdateMetadata(ctx context.Context, ch MetadataChange) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.ready(ctx); err != nil {
		return -1, err
	}
	readVersion, txnID := t.snap.Version, uuid.NewString()
	render := func() ([]Action, error) {
		m, err := t.changedMetadata(ch.Update)
		if err != nil {
			return nil, err
		}
		ms := t.opts.Now().UnixMilli()
		ci, err := t.opCommitInfo(opInfo{op: ch.Operation, params: nonNilMap(ch.OperationParameters), blind: true,
			metrics: map[string]string{}}, ms, readVersion, txnID)
		if err != nil {
			return nil, err
		}
		return []Action{{CommitInfo: ci}, {Metadata: m}}, nil
	}
	v, err := t.commitLoop(ctx, render, nil)
	if errors.Is(err, errNoChange) {
		return t.snap.Version, nil
	}
	return v, err
}

// changedMetadata applies update to a copy of the current metaData and
// checks the result.
func (t *Table) changedMetadata(update func(*Metadata) error) (*Metadata, error) {
	cur := t.snap.Metadata
	m := cloneMetadata(cur)
	if err := update(&m); err != nil {
		return nil, err
	}
	if reflect.DeepEqual(m, cur) {
		return nil, errNoChange
	}
	if m.ID != cur.ID {
		return nil, errors.New("a metaData update cannot change the table id")
	}
	if !slices.Equal(nonNil(m.PartitionColumns), nonNil(cur.PartitionColumns)) {
		return nil, errors.New("a metaData update cannot change the partition columns")
	}
	if err := schemaExtends(cur.SchemaString, m.SchemaString); err != nil {
		return nil, err
	}
	if err := validateNewTable(m, t.snap.Protocol); err != nil {
		return nil, err
	}
	return &m, nil
}

func cloneMetadata(m Metadata) Metadata {
	c := m
	c.Configuration = maps.Clone(m.Configuration)
	if c.Configuration == nil {
		c.Configuration = map[string]string{}
	}
	c.Format.Options = maps.Clone(m.Format.Options)
	c.PartitionColumns = slices.Clone(m.PartitionColumns)
	return c
}

// schemaExtends accepts a new schema that keeps every existing column
// identical and in place and appends only nullable columns: every data
// file already written stays valid (an absent column reads as null).
func schemaExtends(oldSchema, newSchema string) error {
	if SameSchema(oldSchema, newSchema) {
		return nil
	}
	o, err := ParseSchema(oldSchema)
	if err != nil {
		return err
	}
	n, err := ParseSchema(newSchema)
	if err != nil {
		return err
	}
	if len(n.Fields) < len(o.Fields) {
		return fmt.Errorf("schema change drops columns (%d → %d): only appending nullable columns is supported", len(o.Fields), len(n.Fields))
	}
	for i, f := range o.Fields {
		if !SameField(f, n.Fields[i]) {
			return fmt.Errorf("schema change alters column %q: only appending nullable columns is supported", f.Name)
		}
	}
	for _, f := range n.Fields[len(o.Fields):] {
		if !f.Nullable {
			return fmt.Errorf("new column %q must be nullable (existing files have no value for it)", f.Name)
		}
	}
	return nil
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
