package decoding

import (
	"fmt"
	"slices"
)

// minColumnBytes is the smallest encoding of a column in a Relation message:
// flags, an empty name's NUL, type OID and type modifier.
const minColumnBytes = 1 + 1 + 4 + 4

// relation parses a Relation message and updates the cache. A description
// equal to the cached one keeps the cached pointer; any change replaces it
// with a new *Relation, so rows decoded earlier keep the one they were
// decoded with.
func (d *Decoder) relation(r *reader) error {
	id := r.u32()
	ns, name := r.cstr(), r.cstr()
	_ = r.u8() // replica identity setting
	n := int(r.u16())
	if err := r.err(); err != nil {
		return err
	}
	if n*minColumnBytes > r.remaining() {
		return fmt.Errorf("relation %s.%s (id %d): %d columns announced, %d bytes left: %w",
			ns, name, id, n, r.remaining(), errShort)
	}
	rel := &Relation{ID: id, Namespace: string(ns), Name: string(name), Columns: make([]Column, n)}
	for i := range rel.Columns {
		flags := r.u8()
		colName := r.cstr()
		typ, mod := r.u32(), int32(r.u32())
		if err := r.err(); err != nil {
			return fmt.Errorf("relation %s (id %d) column %d: %w", rel.qualified(), id, i, err)
		}
		rel.Columns[i] = Column{Name: string(colName), TypeOID: typ, TypeMod: mod, Key: flags&1 != 0}
	}
	if old, ok := d.relations[id]; ok && old.equal(rel) {
		return nil
	}
	d.relations[id] = rel
	return nil
}

func (rel *Relation) qualified() string { return rel.Namespace + "." + rel.Name }

func (rel *Relation) equal(o *Relation) bool {
	return rel.ID == o.ID && rel.Namespace == o.Namespace && rel.Name == o.Name &&
		slices.Equal(rel.Columns, o.Columns)
}
