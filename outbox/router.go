package outbox

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/deltabus/deltabus/decoding"
)

// Field positions, in Mapping and mappingFields order.
const (
	fID = iota
	fTopic
	fKey
	fType
	fSchemaVersion
	fPayload
	fHeaders
	fOccurredAt
	numFields
)

// ReasonUpdate is the dead-letter reason of an UPDATE of an outbox row.
const ReasonUpdate = "UPDATE of outbox row: outbox rows are immutable"

// RouteStats counts what a Router has seen.
type RouteStats struct {
	Events      uint64 // inserts that became events
	DeadLetters uint64 // rows that became dead letters (updates included)
	Updates     uint64 // UPDATEs of outbox rows (each also a dead letter)
	Deletes     uint64 // DELETEs: expected clean-up, ignored
	Truncates   uint64 // TRUNCATEs: ignored
}

// Router turns decoded outbox rows into Events or DeadLetters.
//
// It resolves the mapped column positions once per *decoding.Relation
// (cached by pointer: a new Relation for the same table replaces the
// cached one), so routing a row does no map lookups and allocates only the
// Event and one string holding its text fields. A Router is not safe for
// concurrent use.
type Router struct {
	mappings Mappings
	plans    map[uint32]*plan // by relation ID; plan.rel is the pointer it was built for
	last     *plan
	stats    RouteStats
	names    map[string]string // topic names met, interned for RouteView
}

// NewRouter returns a Router that reads each table with its mapping in ms.
func NewRouter(ms Mappings) *Router {
	return &Router{mappings: ms, plans: make(map[uint32]*plan), names: make(map[string]string)}
}

// Stats returns the counts so far.
func (r *Router) Stats() RouteStats { return r.stats }

// Route turns one decoded row into an event or a dead letter.
//
// For an INSERT exactly one of ev and dl is non-nil: ev when every mapped
// column holds a valid value, else dl with the reason (all problems found,
// joined by "; "). An UPDATE yields a dead letter with ReasonUpdate first:
// outbox rows are immutable. DELETE and TRUNCATE yield nothing (they are
// counted in Stats). err is non-nil only for input the decoder must never
// produce (no relation, no new tuple, a tuple that does not match its
// relation, an unknown op); the caller should stop.
//
// ev and dl do not alias row: they stay valid after the decoder reuses its
// buffers.
func (r *Router) Route(row *decoding.Row) (ev *Event, dl *DeadLetter, err error) {
	p, v, err := r.check(row)
	if p == nil || err != nil {
		return nil, nil, err
	}
	if len(v.reasons) == 0 && p.missing == "" {
		r.stats.Events++
		return p.event(row, &v), nil, nil
	}
	r.stats.DeadLetters++
	return nil, p.deadLetter(row, &v), nil
}

// RouteView is Route for a caller that is done with the event before the
// decoder's next message, as a relay appending it to a batch is: instead
// of a new Event it fills view, whose text fields alias row's data (see
// View), and reports whether the row is an event. Dead letters, rare,
// are built as Route builds them.
func (r *Router) RouteView(row *decoding.Row, view *View) (isEvent bool, dl *DeadLetter, err error) {
	p, v, err := r.check(row)
	if p == nil || err != nil {
		return false, nil, err
	}
	if len(v.reasons) == 0 && p.missing == "" {
		r.stats.Events++
		p.view(row, &v, view, r.topicName)
		return true, nil, nil
	}
	r.stats.DeadLetters++
	return false, p.deadLetter(row, &v), nil
}

// check validates row and reads its fields; a nil plan (and error) means
// the row is ignored.
func (r *Router) check(row *decoding.Row) (*plan, values, error) {
	var v values
	if row == nil || row.Relation == nil {
		return nil, v, errors.New("route row: row without relation")
	}
	switch row.Op {
	case decoding.OpDelete:
		r.stats.Deletes++
		return nil, v, nil
	case decoding.OpTruncate:
		r.stats.Truncates++
		return nil, v, nil
	case decoding.OpInsert, decoding.OpUpdate:
	default:
		return nil, v, fmt.Errorf("route row of %s: unknown op %d", tableName(row.Relation), row.Op)
	}
	if len(row.New) != len(row.Relation.Columns) {
		return nil, v, fmt.Errorf("route row of %s: tuple has %d values, relation has %d columns",
			tableName(row.Relation), len(row.New), len(row.Relation.Columns))
	}
	p := r.plan(row.Relation)
	p.check(row, &v)
	if row.Op == decoding.OpUpdate {
		r.stats.Updates++
		v.reasons = append([]string{ReasonUpdate}, v.reasons...)
	}
	return p, v, nil
}

// maxTopicNames bounds the interned topic names; past it, each event's
// topic is a new string.
const maxTopicNames = 4096

// topicName returns the topic name b, valid, as a string that does not
// alias b: the one interned for it, once met.
func (r *Router) topicName(b []byte) string {
	if s, ok := r.names[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(r.names) < maxTopicNames {
		r.names[s] = s
	}
	return s
}

// plan returns the column plan of rel, building it on first sight.
func (r *Router) plan(rel *decoding.Relation) *plan {
	if p := r.last; p != nil && p.rel == rel {
		return p
	}
	p := r.plans[rel.ID]
	if p == nil || p.rel != rel {
		p = newPlan(rel, r.mappings.For(rel.Namespace, rel.Name))
		r.plans[rel.ID] = p
	}
	r.last = p
	return p
}

func tableName(rel *decoding.Relation) string { return rel.Namespace + "." + rel.Name }

// PostgreSQL type OIDs whose text output is always valid JSON.
const (
	oidJSON  = 114
	oidJSONB = 3802
)

// plan is the routing recipe of one relation under one mapping.
type plan struct {
	rel      *decoding.Relation
	table    string            // "schema.table"
	cols     [numFields]string // mapped column names, "" when unmapped
	idx      [numFields]int    // column position of each field, -1 when unmapped or missing
	validate [numFields]bool   // payload/headers column is not json/jsonb: check the text
	noZone   bool              // occurred_at is a timestamp without time zone
	missing  string            // why the relation cannot be an outbox, "" when it can
	rawKeys  []string          // JSON-encoded column names followed by ':'
}

func newPlan(rel *decoding.Relation, m Mapping) *plan {
	p := &plan{rel: rel, table: tableName(rel), cols: m.columns()}
	var missing []string
	for f, col := range p.cols {
		p.idx[f] = -1
		if col == "" {
			if f != fSchemaVersion && f != fHeaders && f != fOccurredAt {
				missing = append(missing, fmt.Sprintf("the mapping has no column for %s", mappingFields[f]))
			}
			continue
		}
		for i, c := range rel.Columns {
			if c.Name == col {
				p.idx[f] = i
				p.validate[f] = c.TypeOID != oidJSON && c.TypeOID != oidJSONB
				p.noZone = p.noZone || f == fOccurredAt && c.TypeOID == oidTimestamp
				break
			}
		}
		if p.idx[f] < 0 {
			missing = append(missing, fmt.Sprintf("missing column %q (%s)", col, mappingFields[f]))
		}
	}
	if len(missing) > 0 {
		p.missing = fmt.Sprintf("table %s is not an outbox: %s", p.table, strings.Join(missing, ", "))
	}
	p.rawKeys = make([]string, len(rel.Columns))
	for i, c := range rel.Columns {
		p.rawKeys[i] = jsonString(c.Name) + ":"
	}
	return p
}

// values holds what check found in one row.
type values struct {
	ok            [numFields]bool // the field has a usable, non-NULL value
	schemaVersion int32
	occurredAt    time.Time
	reasons       []string
}
