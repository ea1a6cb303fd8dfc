package outbox

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/deltabus/deltabus/decoding"
)

// check reads every mapped field of row.New into v, recording a reason for
// each unusable value. It allocates only when a value is bad.
func (p *plan) check(row *decoding.Row, v *values) {
	v.schemaVersion = 1
	for f := range numFields {
		i := p.idx[f]
		if i < 0 {
			continue
		}
		if reason := p.checkField(f, row.New[i], v); reason != "" {
			v.reasons = append(v.reasons, reason)
		}
	}
}

// checkField validates one value; it returns "" when the value is usable
// (or NULL in an optional field, which then keeps its default).
func (p *plan) checkField(f int, d decoding.Datum, v *values) string {
	col := p.cols[f]
	switch d.Kind {
	case decoding.DatumText:
	case decoding.DatumNull:
		if f == fSchemaVersion || f == fHeaders || f == fOccurredAt {
			return ""
		}
		return fmt.Sprintf("NULL %s in column %q", mappingFields[f], col)
	case decoding.DatumUnchanged:
		return fmt.Sprintf("column %q (%s) is an unchanged TOAST value: not sent, so unknown", col, mappingFields[f])
	default:
		return fmt.Sprintf("column %q (%s) came in binary format (kind %q); the relay reads text", col, mappingFields[f], d.Kind)
	}
	if reason := p.checkText(f, d.Data, v); reason != "" {
		return reason
	}
	v.ok[f] = true
	return ""
}

func (p *plan) checkText(f int, b []byte, v *values) string {
	col := p.cols[f]
	var err error
	switch f {
	case fID:
		if !isUUID(b) {
			return fmt.Sprintf("id %s in column %q is not a uuid", quoteShort(b), col)
		}
	case fTopic:
		if reason := topicProblem(b); reason != "" {
			return fmt.Sprintf("invalid topic name %s in column %q: %s", quoteShort(b), col, reason)
		}
	case fSchemaVersion:
		if v.schemaVersion, err = decoding.ParseInt32(b); err != nil {
			v.schemaVersion = 1
			return fmt.Sprintf("schema_version %s in column %q is not a 32-bit integer", quoteShort(b), col)
		}
	case fPayload, fHeaders:
		if p.validate[f] && !json.Valid(b) {
			return fmt.Sprintf("%s in column %q is not valid JSON", mappingFields[f], col)
		}
	case fOccurredAt:
		if v.occurredAt, err = parseTimestamp(b, p.noZone); err != nil {
			return fmt.Sprintf("occurred_at %s in column %q is not an ISO timestamp", quoteShort(b), col)
		}
	}
	return ""
}

// event builds the Event of a row that check found valid. The text fields
// share one allocation.
func (p *plan) event(row *decoding.Row, v *values) *Event {
	var lens [numFields]int
	n := 0
	for _, f := range [...]int{fID, fTopic, fKey, fType, fPayload, fHeaders} {
		if v.ok[f] {
			lens[f] = len(row.New[p.idx[f]].Data)
			n += lens[f]
		}
	}
	var sb strings.Builder
	sb.Grow(n)
	for _, c := range row.New[p.idx[fID]].Data {
		if c >= 'A' && c <= 'F' {
			c += 'a' - 'A'
		}
		sb.WriteByte(c)
	}
	for _, f := range [...]int{fTopic, fKey, fType, fPayload, fHeaders} {
		if v.ok[f] {
			sb.Write(row.New[p.idx[f]].Data)
		}
	}
	s := sb.String()
	next := func(f int) string {
		out := s[:lens[f]]
		s = s[lens[f]:]
		return out
	}
	box := &struct {
		ev      Event
		headers string
	}{ev: Event{
		ID: next(fID), Topic: next(fTopic), Key: next(fKey), Type: next(fType),
		SchemaVersion: v.schemaVersion, Payload: next(fPayload),
		OccurredAt: v.occurredAt,
	}}
	ev := &box.ev // Event and headers share one allocation
	if v.ok[fHeaders] {
		box.headers = next(fHeaders)
		ev.Headers = &box.headers
	}
	setTxn(ev, row)
	if !v.ok[fOccurredAt] {
		ev.OccurredAt = ev.CommitTime
	}
	return ev
}

// setTxn copies the source transaction context of row into ev.
func setTxn(ev *Event, row *decoding.Row) {
	ev.CommitLSN = int64(row.CommitLSN)
	ev.Seq = int32(row.Seq)
	ev.Xid = int64(row.Xid)
	ev.CommitTime = row.CommitTime.UTC().Truncate(time.Microsecond)
}

// deadLetter builds the DeadLetter of a row with problems: the fields that
// could be read, the reasons, the source table and the raw row. Its ID is
// the row's uuid when valid, else "dl-<commit LSN hex>-<seq>", so it is never
// empty; OccurredAt defaults to the commit time and SchemaVersion to 1.
func (p *plan) deadLetter(row *decoding.Row, v *values) *DeadLetter {
	dl := &DeadLetter{SourceTable: p.table, RawRow: p.rawRow(row.New)}
	setTxn(&dl.Event, row)
	text := func(f int) string {
		if i := p.idx[f]; i >= 0 && row.New[i].Kind == decoding.DatumText && (v.ok[f] || f == fTopic) {
			return string(row.New[i].Data)
		}
		return ""
	}
	dl.ID = strings.ToLower(text(fID))
	if dl.ID == "" {
		dl.ID = fmt.Sprintf("dl-%016X-%d", uint64(row.CommitLSN), row.Seq)
	}
	dl.Topic, dl.Key, dl.Type, dl.Payload = text(fTopic), text(fKey), text(fType), text(fPayload)
	dl.SchemaVersion = v.schemaVersion
	if h := text(fHeaders); h != "" {
		dl.Headers = &h
	}
	dl.OccurredAt = v.occurredAt
	if !v.ok[fOccurredAt] {
		dl.OccurredAt = dl.CommitTime
	}
	reasons := v.reasons
	if p.missing != "" {
		reasons = append([]string{p.missing}, reasons...)
	}
	dl.Reason = strings.Join(reasons, "; ")
	return dl
}

// rawRow renders a tuple as a JSON object: column name -> text value, null
// for NULL, {"unchanged_toast":true} for an unchanged TOAST value (not
// sent) and {"binary_base64":"..."} for a binary value.
func (p *plan) rawRow(tuple []decoding.Datum) string {
	var sb strings.Builder
	sb.WriteByte('{')
	for i, d := range tuple {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(p.rawKeys[i])
		switch d.Kind {
		case decoding.DatumNull:
			sb.WriteString("null")
		case decoding.DatumUnchanged:
			sb.WriteString(`{"unchanged_toast":true}`)
		case decoding.DatumBinary:
			sb.WriteString(`{"binary_base64":"` + base64.StdEncoding.EncodeToString(d.Data) + `"}`)
		default:
			sb.WriteString(jsonString(string(d.Data)))
		}
	}
	sb.WriteByte('}')
	return sb.String()
}

// jsonString returns s as a JSON string literal. Invalid UTF-8 becomes
// U+FFFD, as encoding/json does.
func jsonString(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

// quoteShort quotes a value for a reason, cut to 64 bytes.
func quoteShort(b []byte) string {
	const max = 64
	if len(b) > max {
		return fmt.Sprintf("%q...", b[:max])
	}
	return fmt.Sprintf("%q", b)
}
