package delta

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
)

// ErrIncompatibleChange is wrapped by every error that reports a protocol
// or metaData change a writer handle cannot follow: the table was replaced
// (new metaData id), its schema or partitioning changed, or its new
// protocol needs something this writer does not implement. The handle
// refuses to commit from then on; reopen the table (OpenTable) and decide
// again whether to write to it.
var ErrIncompatibleChange = errors.New("delta: incompatible table change")

// ErrConcurrentMetadataChange is the former name of ErrIncompatibleChange.
// Compatible metaData changes (table properties, name, description) no
// longer stop a writer.
//
// Deprecated: use ErrIncompatibleChange.
var ErrConcurrentMetadataChange = ErrIncompatibleChange

// IncompatibleChangeError says which version changed the table and how.
// errors.Is(err, ErrIncompatibleChange) holds for it; so does
// errors.Is(err, ErrUnsupportedProtocol) when the new protocol is the cause.
type IncompatibleChangeError struct {
	Version int64  // the commit that made the change (or the version at which a reload found it)
	Reason  string // e.g. "schema changed", "table replaced (new id ...)", "protocol: table requires writer feature ..."
	cause   error
}

func (e *IncompatibleChangeError) Error() string {
	return fmt.Sprintf("delta: incompatible table change at version %d: %s", e.Version, e.Reason)
}

// Is matches ErrIncompatibleChange.
func (e *IncompatibleChangeError) Is(target error) bool { return target == ErrIncompatibleChange }

// Unwrap returns the protocol refusal behind the change, if any.
func (e *IncompatibleChangeError) Unwrap() error { return e.cause }

// checkChange decides whether a writer that appended to a table with
// (oldP, oldM) may go on appending after the table moved to (newP, newM).
// Compatible: the new protocol is still writable (CheckWritable) and the
// metaData keeps its id, schema (SameSchema: compared as JSON values, so key
// order and spacing do not matter, and column comments may change) and
// partition columns; configuration, name, description and createdTime may
// change.
func checkChange(v int64, oldP Protocol, oldM Metadata, newP Protocol, newM Metadata) error {
	fail := func(cause error, format string, args ...any) error {
		return &IncompatibleChangeError{Version: v, Reason: fmt.Sprintf(format, args...), cause: cause}
	}
	if err := CheckWritable(newP, newM); err != nil {
		var pe *protocolError
		if errors.As(err, &pe) {
			return fail(err, "protocol: %s", pe.detail)
		}
		return fail(err, "%v", err)
	}
	switch {
	case newM.ID != oldM.ID:
		return fail(nil, "table replaced (new id %s, was %s)", newM.ID, oldM.ID)
	case !SameSchema(oldM.SchemaString, newM.SchemaString):
		return fail(nil, "schema changed")
	case !slices.Equal(nonNil(oldM.PartitionColumns), nonNil(newM.PartitionColumns)):
		return fail(nil, "partition columns changed from %v to %v", nonNil(oldM.PartitionColumns), nonNil(newM.PartitionColumns))
	}
	return nil
}

// SameSchema reports whether two schemaStrings describe the same schema:
// they are compared as JSON values, so key order and spacing (which differ
// between writers re-serialising a schema) do not matter, and column
// comments (the "comment" key of a field's metadata, at any depth) are left
// out: a comment documents a column and changes no value a reader or a
// writer handles (`COMMENT ON COLUMN`, `relay topics describe`). Every
// other metadata key (column mapping, invariants, generation expressions)
// counts.
func SameSchema(a, b string) bool {
	if a == b {
		return true
	}
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(withoutComments(x), withoutComments(y))
}

// withoutComments drops "comment" from the metadata of every field of a
// decoded schema or type, in place, and returns v; a field without
// metadata gets an empty one.
func withoutComments(v any) any {
	switch t := v.(type) {
	case map[string]any:
		if _, isField := t["name"]; isField {
			switch md := t["metadata"].(type) {
			case map[string]any:
				delete(md, "comment")
			case nil: // absent: the same as {}
				t["metadata"] = map[string]any{}
			}
		}
		for _, sub := range t {
			withoutComments(sub)
		}
	case []any:
		for _, sub := range t {
			withoutComments(sub)
		}
	}
	return v
}

// SameField reports whether two schema fields are the same column (name,
// type, nullability and metadata other than comments), compared as JSON
// values.
func SameField(a, b StructField) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && SameSchema(string(x), string(y))
}

// commitTableState returns the protocol and metaData a commit leaves the
// table with, starting from (p, m), and whether the commit changes either.
func commitTableState(acts []Action, p Protocol, m Metadata) (Protocol, Metadata, bool) {
	changed := false
	for _, a := range acts {
		if a.Protocol != nil {
			p, changed = *a.Protocol, true
		}
		if a.Metadata != nil {
			m, changed = *a.Metadata, true
		}
	}
	return p, m, changed
}
