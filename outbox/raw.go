package outbox

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/decoding"
)

// RawColumn is one column of an outbox row read outside the stream: a dead
// letter's raw row, or a row read back from the outbox table.
type RawColumn struct {
	Name string
	// Text is the value's text form; nil for NULL.
	Text *string
	// Unchanged: an unchanged TOAST value (the stream did not send it);
	// Binary: a value that came in binary format.
	Unchanged bool
	Binary    []byte
	// TypeOID is the column's type when known; 0 lets RowRouter read an
	// occurred_at value with or without an offset alike.
	TypeOID uint32
}

// RowTxn is the source transaction context a routed row keeps.
type RowTxn struct {
	CommitLSN  int64
	Seq        int32
	Xid        int64
	CommitTime time.Time
}

// PostgreSQL type OIDs RowRouter gives a column whose type is not known.
const (
	textOID        = 25
	timestamptzOID = 1184
)

// RowRouter routes rows read outside the stream with the same rules, and
// the same reasons, as the stream's Router: a dead letter redriven once its
// mapping is fixed becomes the event the stream would have made of its row.
// A RowRouter is not safe for concurrent use.
type RowRouter struct {
	r    *Router
	rels map[string]*decoding.Relation // by table and column list
}

// NewRowRouter returns a RowRouter that reads each table with its mapping
// in ms.
func NewRowRouter(ms Mappings) *RowRouter {
	return &RowRouter{r: NewRouter(ms), rels: map[string]*decoding.Relation{}}
}

// Route routes one INSERTed row of table ("schema.table"): exactly one of
// ev and dl is non-nil, as for Router.Route.
func (rr *RowRouter) Route(table string, cols []RawColumn, txn RowTxn) (*Event, *DeadLetter) {
	row := decoding.Row{Relation: rr.relation(table, cols), Op: decoding.OpInsert, Seq: int(txn.Seq), Xid: uint32(txn.Xid),
		CommitLSN: pglogrepl.LSN(txn.CommitLSN), CommitTime: txn.CommitTime, New: make([]decoding.Datum, len(cols))}
	for i, c := range cols {
		switch {
		case c.Unchanged:
			row.New[i] = decoding.Datum{Kind: decoding.DatumUnchanged}
		case c.Binary != nil:
			row.New[i] = decoding.Datum{Kind: decoding.DatumBinary, Data: c.Binary}
		case c.Text == nil:
			row.New[i] = decoding.Datum{Kind: decoding.DatumNull}
		default:
			row.New[i] = decoding.Datum{Kind: decoding.DatumText, Data: []byte(*c.Text)}
		}
	}
	ev, dl, err := rr.r.Route(&row)
	if err != nil { // not for a row built here; said as a dead letter all the same
		return nil, &DeadLetter{Event: Event{CommitLSN: txn.CommitLSN, Seq: txn.Seq}, Reason: err.Error(), SourceTable: table}
	}
	if ev != nil {
		ev.Xid = txn.Xid // the row keeps the whole xid it had
	}
	return ev, dl
}

// relation returns the relation of table with cols, typed by what the
// columns say (text when unknown; occurred_at by the form of its value).
func (rr *RowRouter) relation(table string, cols []RawColumn) *decoding.Relation {
	schema, name, _ := strings.Cut(table, ".")
	m := rr.r.mappings.For(schema, name)
	var key strings.Builder
	key.WriteString(table)
	rel := &decoding.Relation{ID: uint32(len(rr.rels) + 1), Namespace: schema, Name: name, Columns: make([]decoding.Column, len(cols))}
	for i, c := range cols {
		oid := c.TypeOID
		if oid == 0 {
			oid = textOID
			if c.Name == m.OccurredAt && c.Text != nil {
				oid = timestamptzOID
				if !hasZone(*c.Text) {
					oid = oidTimestamp
				}
			}
		}
		rel.Columns[i] = decoding.Column{Name: c.Name, TypeOID: oid}
		fmt.Fprintf(&key, "\x00%s\x00%d", c.Name, oid)
	}
	if r, ok := rr.rels[key.String()]; ok {
		return r
	}
	if len(rr.rels) < 1024 {
		rr.rels[key.String()] = rel
	}
	return rel
}

// hasZone reports whether a timestamp's text carries an offset (or Z)
// after its date.
func hasZone(s string) bool {
	if len(s) <= 10 {
		return false
	}
	return strings.ContainsAny(s[10:], "+-Zz")
}

// ParseRawRow reads a dead letter's raw row, the JSON object Router wrote
// (column name -> text, null, {"unchanged_toast":true} or
// {"binary_base64":...}), back into its columns, in order.
func ParseRawRow(raw string) ([]RawColumn, error) {
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("raw row is not a JSON object")
	}
	var cols []RawColumn
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("raw row: %w", err)
		}
		name, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("raw row column %q: %w", name, err)
		}
		c, err := rawColumn(name, v)
		if err != nil {
			return nil, err
		}
		cols = append(cols, c)
	}
	return cols, nil
}

func rawColumn(name string, v json.RawMessage) (RawColumn, error) {
	c := RawColumn{Name: name}
	switch {
	case bytes.Equal(v, []byte("null")):
	case len(v) > 0 && v[0] == '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return c, fmt.Errorf("raw row column %q: %w", name, err)
		}
		c.Text = &s
	case len(v) > 0 && v[0] == '{':
		var o struct {
			Unchanged bool    `json:"unchanged_toast"`
			Binary    *string `json:"binary_base64"`
		}
		if err := json.Unmarshal(v, &o); err != nil {
			return c, fmt.Errorf("raw row column %q: %w", name, err)
		}
		if o.Binary != nil {
			b, err := base64.StdEncoding.DecodeString(*o.Binary)
			if err != nil {
				return c, fmt.Errorf("raw row column %q: %w", name, err)
			}
			c.Binary = b
		} else {
			c.Unchanged = o.Unchanged
		}
	default:
		s := string(v) // a number or a literal: its text as it stands
		c.Text = &s
	}
	return c, nil
}
