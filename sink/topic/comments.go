package topic

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// columnComments documents every column of a topic table, as Delta readers
// and catalogs show it (the "comment" of each field's metadata).
var columnComments = [numDeadLetterCols]string{
	colEventID:          "Unique id of the event (outbox id); the deduplication key.",
	colTopic:            "Topic the event was published to.",
	colKey:              "Partitioning and ordering key chosen by the producer (e.g. the entity id).",
	colType:             "Event type, e.g. OrderCreated.",
	colSchemaVersion:    "Version of the payload's schema for this type.",
	colPayload:          "Event payload, JSON text.",
	colHeaders:          "Producer headers (trace context and others), JSON text; NULL when none.",
	colOccurredAt:       "When the producer says the event happened (UTC).",
	colCommitLSN:        "Source commit LSN: with seq, the source commit order.",
	colSeq:              "Position of the event within its source transaction.",
	colXid:              "Source transaction id.",
	colCommitTime:       "Source commit time (UTC).",
	colReason:           "Why the relay could not turn the outbox row into an event.",
	colSourceTable:      "Source table the row came from (schema.table).",
	colRawRow:           "The outbox row as the relay received it, JSON text.",
	colDeadLetterSource: sourceComment,
}

const sourceComment = "Which source database's relay wrote the row (its appId, deltabus-<system id>-<slot>): with event_id, the deduplication key across sources."

// ColumnComments returns the comment of every column of a topic table (or
// of the dead-letter table), by column name.
func ColumnComments(deadLetter bool) map[string]string {
	cols := tableColumns(deadLetter)
	out := make(map[string]string, len(cols))
	for i, c := range cols {
		out[c.name] = columnComments[i]
	}
	out[sourceColumn.name] = sourceComment
	return out
}

// WithComments returns schemaString with each top-level field named in
// comments given that comment (an empty one removes it); every other byte
// of meaning (types, nullability, other metadata) is kept. Fields keep an
// explicit "metadata" object, as the Delta protocol requires.
func WithComments(schemaString string, comments map[string]string) (string, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(schemaString)))
	dec.UseNumber()
	var s map[string]any
	if err := dec.Decode(&s); err != nil {
		return "", fmt.Errorf("parse schemaString: %w", err)
	}
	fields, ok := s["fields"].([]any)
	if !ok || s["type"] != "struct" {
		return "", fmt.Errorf("parse schemaString: not a struct with fields")
	}
	for _, f := range fields {
		field, ok := f.(map[string]any)
		if !ok {
			return "", fmt.Errorf("parse schemaString: a field is not an object")
		}
		md, _ := field["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			field["metadata"] = md
		}
		name, _ := field["name"].(string)
		c, ok := comments[name]
		switch {
		case !ok:
		case c == "":
			delete(md, "comment")
		default:
			md["comment"] = c
		}
	}
	b, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	return string(b), nil
}
