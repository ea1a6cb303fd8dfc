package bootstrap

import (
	"encoding/binary"
	"encoding/json"
	"strings"
	"time"
	"unsafe"

	"github.com/deltabus/deltabus/decoding"
	"github.com/deltabus/deltabus/outbox"
)

// Event fields in outbox.Mapping order.
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

// fastPlan builds events straight from binary tuples, without the text
// form, for a table whose mapped columns have the usual types: uuid id;
// text topic, key and type; int2/int4/int8 schema_version; json, jsonb or
// text payload and headers; timestamp or timestamptz occurred_at.
//
// It only ever accepts a row the Router would turn into the same event.
// Any other row (a NULL where a value is needed, an invalid topic, text
// that is not JSON, an out-of-range number or timestamp) goes the slow
// way: converted to its text tuple and routed by outbox.Router, exactly
// like a streamed row, so dead letters and their reasons are the stream's.
type fastPlan struct {
	col      [numFields]int // column of each field, -1 when the mapping has none
	kind     [numFields]binKind
	validate [numFields]bool // payload/headers are text columns: check the JSON
}

// newFastPlan returns nil when the table does not fit: a mapped column is
// missing (the Router then dead-letters every row) or has another type.
func newFastPlan(rel *decoding.Relation, kinds []binKind, m outbox.Mapping) *fastPlan {
	names := [numFields]string{m.ID, m.Topic, m.Key, m.Type, m.SchemaVersion, m.Payload, m.Headers, m.OccurredAt}
	p := &fastPlan{}
	for f, name := range names {
		p.col[f] = -1
		if name == "" {
			if f == fID || f == fTopic || f == fKey || f == fType || f == fPayload {
				return nil
			}
			continue
		}
		for i, c := range rel.Columns {
			if c.Name == name {
				p.col[f], p.kind[f] = i, kinds[i]
				p.validate[f] = c.TypeOID != oidJSON && c.TypeOID != oidJSONB
				break
			}
		}
		if p.col[f] < 0 || !fastKindOK(f, p.kind[f]) {
			return nil
		}
	}
	return p
}

func fastKindOK(f int, k binKind) bool {
	switch f {
	case fID:
		return k == binUUID
	case fTopic, fKey, fType:
		return k == binText
	case fSchemaVersion:
		return k == binInt2 || k == binInt4 || k == binInt8
	case fPayload, fHeaders:
		return k == binText || k == binJSONB
	case fOccurredAt:
		return k == binTimestamp || k == binTimestamptz
	}
	return false
}

// Timestamps the text form of which decoding.ParseTimestamptz is sure to
// read the same: years 1 to 9999 (others go the slow way).
var (
	fastMinTS = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro() - pgEpochMicros
	fastMaxTS = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro() - pgEpochMicros
)

// fastRow is the reusable output of fastPlan.build. The strings of ev
// alias the COPY buffers and idText: valid only until the next row, which
// is enough because topic.FileWriter.Append copies them.
type fastRow struct {
	ev        outbox.Event
	headers   string
	idText    [36]byte
	key       idKey
	lastTopic string // the last topic accepted (a topic unit has one topic)
	// valid holds topics accepted (key and value the same copy), at most
	// maxValidTopics: the rows of a range unit interleave topics.
	valid map[string]string
}

// maxValidTopics bounds fastRow.valid.
const maxValidTopics = 4096

// validTopic reports whether topic is a valid topic name, and if so makes
// it the last topic.
func (r *fastRow) validTopic(topic string) bool {
	if known, ok := r.valid[topic]; ok {
		r.lastTopic = known
		return true
	}
	if outbox.ValidTopic(topic) != nil {
		return false
	}
	r.lastTopic = strings.Clone(topic)
	if r.valid == nil {
		r.valid = map[string]string{}
	}
	if len(r.valid) < maxValidTopics {
		r.valid[r.lastTopic] = r.lastTopic
	}
	return true
}

// build fills r from a binary tuple; ok is false when the row must take
// the slow way.
func (p *fastPlan) build(d []decoding.Datum, r *fastRow) (ok bool) {
	ev := &r.ev
	id := d[p.col[fID]]
	if id.Kind != decoding.DatumBinary || len(id.Data) != 16 {
		return false
	}
	r.key = keyOf16([16]byte(id.Data))
	appendUUID(r.idText[:0], id.Data)
	ev.ID = unsafe.String(&r.idText[0], len(r.idText))
	var strs [3]string
	for i, f := range [...]int{fTopic, fKey, fType} {
		v := d[p.col[f]]
		if v.Kind != decoding.DatumBinary {
			return false
		}
		strs[i] = aliasString(v.Data)
	}
	if strs[0] != r.lastTopic && !r.validTopic(strs[0]) {
		return false
	}
	ev.Topic, ev.Key, ev.Type = strs[0], strs[1], strs[2]
	if !p.schemaVersion(d, ev) {
		return false
	}
	payload, ok := p.json(fPayload, d)
	if !ok || payload == nil {
		return false
	}
	ev.Payload = aliasString(payload)
	headers, ok := p.json(fHeaders, d)
	if !ok {
		return false
	}
	ev.Headers = nil
	if headers != nil {
		r.headers = aliasString(headers)
		ev.Headers = &r.headers
	}
	ev.OccurredAt = ev.CommitTime
	if c := p.col[fOccurredAt]; c >= 0 && d[c].Kind == decoding.DatumBinary {
		if len(d[c].Data) != 8 {
			return false
		}
		us := int64(binary.BigEndian.Uint64(d[c].Data))
		if us < fastMinTS || us >= fastMaxTS {
			return false
		}
		ev.OccurredAt = pgTime(us)
	}
	return true
}

func (p *fastPlan) schemaVersion(d []decoding.Datum, ev *outbox.Event) bool {
	ev.SchemaVersion = 1
	c := p.col[fSchemaVersion]
	if c < 0 || d[c].Kind != decoding.DatumBinary {
		return true // NULL or no column: the default
	}
	v := d[c].Data
	switch {
	case p.kind[fSchemaVersion] == binInt2 && len(v) == 2:
		ev.SchemaVersion = int32(int16(binary.BigEndian.Uint16(v)))
	case p.kind[fSchemaVersion] == binInt4 && len(v) == 4:
		ev.SchemaVersion = int32(binary.BigEndian.Uint32(v))
	case p.kind[fSchemaVersion] == binInt8 && len(v) == 8:
		n := int64(binary.BigEndian.Uint64(v))
		if n != int64(int32(n)) {
			return false
		}
		ev.SchemaVersion = int32(n)
	default:
		return false
	}
	return true
}

// json returns the JSON text of payload or headers (nil for NULL or no
// column); ok is false when the value is not valid JSON.
func (p *fastPlan) json(f int, d []decoding.Datum) (text []byte, ok bool) {
	c := p.col[f]
	if c < 0 || d[c].Kind != decoding.DatumBinary {
		return nil, true
	}
	v := d[c].Data
	if p.kind[f] == binJSONB {
		if len(v) == 0 || v[0] != 1 {
			return nil, false
		}
		return v[1:], true
	}
	if p.validate[f] && !json.Valid(v) {
		return nil, false
	}
	return v, true
}

// aliasString returns b as a string without copying: b must not change
// while the string is used.
func aliasString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}
