package delta

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// The flat reader decodes a reader's load of a checkpoint (see
// readCheckpoint) straight from the parquet column chunks with
// parquetpage's page reader, without pqarrow: the few rows of a compacted
// table's checkpoint cost little to decode, but pqarrow builds readers,
// buffers and Arrow arrays for every leaf. It knows the leaves the reader needs in the layouts Delta writers
// use (plain structs, 3-level LISTs and MAPs of strings, int32/int64/bool
// leaves); a checkpoint laid out otherwise is read by pqarrow, and both
// give the same actions (TestFlatCheckpointMatchesArrow).

// flatKind is the shape of one field the flat reader decodes.
type flatKind uint8

const (
	flatString flatKind = iota
	flatInt64
	flatInt32
	flatBool
	flatStruct
	flatMap  // MAP<string, string>
	flatList // LIST<string>
)

// flatFields are the fields the reader's load decodes, by struct name
// (format is metaData.format); other fields are not read. remove is not
// read at all, nor the add fields only writers use (writerOnlyChildren).
var flatFields = map[string]map[string]flatKind{
	"txn": {"appId": flatString, "version": flatInt64, "lastUpdated": flatInt64},
	"add": {"path": flatString, "partitionValues": flatMap, "size": flatInt64, "modificationTime": flatInt64,
		"dataChange": flatBool, "stats": flatString, "tags": flatMap},
	"metaData": {"id": flatString, "name": flatString, "description": flatString, "format": flatStruct,
		"schemaString": flatString, "partitionColumns": flatList, "configuration": flatMap, "createdTime": flatInt64},
	"format":         {"provider": flatString, "options": flatMap},
	"protocol":       {"minReaderVersion": flatInt32, "minWriterVersion": flatInt32, "readerFeatures": flatList, "writerFeatures": flatList},
	"domainMetadata": {"domain": flatString, "configuration": flatString, "removed": flatBool},
}

// errFlatUnfit means the flat reader leaves the checkpoint to pqarrow.
var errFlatUnfit = errors.New("checkpoint layout not for the flat reader")

// flatNode is one field the flat reader decodes.
type flatNode struct {
	name     string
	kind     flatKind
	def      int16       // definition level from which the field is not null
	children []*flatNode // flatStruct
	leaf     *flatLeaf   // scalars; MAP keys; LIST elements
	val      *flatLeaf   // MAP values
	first    *flatLeaf   // a leaf under the field, which tells whether it is null
}

// flatBinder maps parquet schema nodes to flatNodes.
type flatBinder struct {
	sc     *schema.Schema
	leaves []*flatLeaf
}

// bindFlat binds the action columns of a checkpoint a reader needs; ok is
// false when one of them is laid out in a way the flat reader does not know
// or none is there.
func bindFlat(sc *schema.Schema) (cols []*flatNode, leaves []*flatLeaf, ok bool) {
	b := &flatBinder{sc: sc}
	root := sc.Root()
	for i := range root.NumFields() {
		f := root.Field(i)
		if !checkpointColumns[f.Name()] || f.Name() == "remove" {
			continue
		}
		n, ok := b.node(f, flatStruct, 0)
		if !ok {
			return nil, nil, false
		}
		cols = append(cols, n)
	}
	return cols, b.leaves, len(cols) > 0
}

func (b *flatBinder) node(n schema.Node, kind flatKind, parentDef int16) (*flatNode, bool) {
	out := &flatNode{name: n.Name(), kind: kind, def: parentDef}
	switch n.RepetitionType() {
	case parquet.Repetitions.Optional:
		out.def++
	case parquet.Repetitions.Repeated:
		return nil, false
	}
	ok := false
	switch kind {
	case flatStruct:
		ok = b.structChildren(out, n)
	case flatMap:
		ok = b.mapLeaves(out, n)
	case flatList:
		ok = b.listLeaf(out, n)
	default:
		out.leaf, ok = b.leaf(n, kind)
		out.first = out.leaf
	}
	return out, ok
}

func (b *flatBinder) structChildren(out *flatNode, n schema.Node) bool {
	g, ok := n.(*schema.GroupNode)
	if !ok || !hasLogicalType(g, schema.NoLogicalType{}) {
		return false
	}
	fields := flatFields[out.name]
	for i := range g.NumFields() {
		kind, known := fields[g.Field(i).Name()]
		if !known {
			continue
		}
		c, ok := b.node(g.Field(i), kind, out.def)
		if !ok {
			return false
		}
		out.children = append(out.children, c)
	}
	if len(out.children) == 0 {
		return false // nothing would tell a null struct from an empty one
	}
	out.first = out.children[0].first
	return true
}

// mapLeaves binds MAP<string,string>: a MAP group holding one repeated
// group of a required key and a value, whatever their names (as pqarrow).
func (b *flatBinder) mapLeaves(out *flatNode, n schema.Node) bool {
	g, ok := n.(*schema.GroupNode)
	if !ok || !hasLogicalType(g, schema.MapLogicalType{}) || g.NumFields() != 1 {
		return false
	}
	kv, ok := g.Field(0).(*schema.GroupNode)
	if !ok || kv.RepetitionType() != parquet.Repetitions.Repeated || kv.NumFields() != 2 ||
		kv.Field(0).RepetitionType() != parquet.Repetitions.Required {
		return false
	}
	if out.leaf, ok = b.leaf(kv.Field(0), flatString); !ok {
		return false
	}
	out.val, ok = b.leaf(kv.Field(1), flatString)
	out.first = out.leaf
	return ok
}

// listLeaf binds the 3-level LIST<string> (a LIST group holding one
// repeated group of one element); the legacy 2-level forms go to pqarrow.
func (b *flatBinder) listLeaf(out *flatNode, n schema.Node) bool {
	g, ok := n.(*schema.GroupNode)
	if !ok || !hasLogicalType(g, schema.ListLogicalType{}) || g.NumFields() != 1 {
		return false
	}
	rep, ok := g.Field(0).(*schema.GroupNode)
	if !ok || rep.RepetitionType() != parquet.Repetitions.Repeated || rep.NumFields() != 1 ||
		rep.Name() == "array" || len(rep.Name()) > 6 && rep.Name()[len(rep.Name())-6:] == "_tuple" {
		return false
	}
	out.leaf, ok = b.leaf(rep.Field(0), flatString)
	out.first = out.leaf
	return ok
}

func (b *flatBinder) leaf(n schema.Node, kind flatKind) (*flatLeaf, bool) {
	p, ok := n.(*schema.PrimitiveNode)
	if !ok || n.RepetitionType() == parquet.Repetitions.Repeated || !leafFits(p, kind) {
		return nil, false
	}
	col := b.sc.ColumnIndexByNode(n)
	if col < 0 {
		return nil, false
	}
	c := b.sc.Column(col)
	l := &flatLeaf{col: col, kind: kind, maxDef: c.MaxDefinitionLevel(), maxRep: c.MaxRepetitionLevel()}
	b.leaves = append(b.leaves, l)
	return l, true
}

// leafFits reports whether a leaf has the types pqarrow reads as the
// Arrow type the field needs (string, int64, int32, boolean).
func leafFits(p *schema.PrimitiveNode, kind flatKind) bool {
	switch kind {
	case flatString:
		return p.PhysicalType() == parquet.Types.ByteArray && hasLogicalType(p, schema.StringLogicalType{})
	case flatInt64:
		return p.PhysicalType() == parquet.Types.Int64 && plainInt(p, 64)
	case flatInt32:
		return p.PhysicalType() == parquet.Types.Int32 && plainInt(p, 32)
	case flatBool:
		return p.PhysicalType() == parquet.Types.Boolean && hasLogicalType(p, schema.NoLogicalType{})
	}
	return false
}

func hasLogicalType(n schema.Node, want schema.LogicalType) bool {
	lt := n.LogicalType()
	if lt == nil {
		_, none := want.(schema.NoLogicalType)
		return none
	}
	return lt.Equals(want)
}

func plainInt(p *schema.PrimitiveNode, bits int8) bool {
	if hasLogicalType(p, schema.NoLogicalType{}) {
		return true
	}
	it, ok := p.LogicalType().(schema.IntLogicalType)
	return ok && it.BitWidth() == bits && it.IsSigned()
}

// parseFlat decodes the given row groups of a checkpoint of size bytes,
// opened as pf and read from src, with the flat reader; errFlatUnfit when
// the layout is one for pqarrow.
func parseFlat(ctx context.Context, pf *file.Reader, src io.ReaderAt, size int64, rowGroups []int) ([]Action, error) {
	cols, leaves, ok := bindFlat(pf.MetaData().Schema)
	if !ok {
		return nil, errFlatUnfit
	}
	sc := flatScratches.Get().(*flatScratch)
	defer func() {
		if cap(sc.chunk) <= maxPooledChunk && cap(sc.batch.Buf) <= maxPooledChunk {
			flatScratches.Put(sc)
		}
	}()
	rows := 0
	for _, i := range rowGroups {
		md := pf.MetaData().RowGroup(i)
		n := md.NumRows()
		if n > maxFlatRows-int64(rows) {
			return nil, errFlatUnfit
		}
		for _, l := range leaves {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if err := l.read(src, size, md, n, sc); err != nil {
				if errors.Is(err, errFlatUnfit) {
					return nil, err
				}
				return nil, fmt.Errorf("row group %d column %s: %w", i, pf.MetaData().Schema.Column(l.col).Path(), err)
			}
		}
		rows += int(n)
	}
	for _, n := range cols {
		if err := n.check(); err != nil {
			return nil, fmt.Errorf("column %s: %w", n.name, err)
		}
	}
	return flatActions(cols, rows)
}

// flatActions turns each row into the actions it holds, in column order,
// as recordActions does.
func flatActions(cols []*flatNode, rows int) ([]Action, error) {
	var out []Action
	adds := make([]*flatAddNodes, len(cols))
	for i, n := range cols {
		if n.name == "add" {
			adds[i] = bindAdd(n)
		}
	}
	for r := range rows {
		for i, n := range cols {
			if adds[i] != nil {
				if a := adds[i].action(r); a != nil {
					out = append(out, Action{Add: a})
				}
				continue
			}
			m, ok := n.value(r).(map[string]any)
			if !ok {
				continue
			}
			a, err := actionFromMap(n.name, m)
			if err != nil {
				return nil, fmt.Errorf("checkpoint row %d column %s: %w", r, n.name, err)
			}
			if a != nil {
				out = append(out, *a)
			}
		}
	}
	return out, nil
}
