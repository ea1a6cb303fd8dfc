package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unsafe"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/propagation"
)

// DefaultTable is the outbox table Write inserts into.
const DefaultTable = "public.outbox"

// NewEvent is an event a producer writes in its own transaction.
type NewEvent struct {
	ID            string    // uuid text; empty: Write generates one (see NewID)
	Topic         string    // must pass ValidTopic
	Key           string    // entity key
	Type          string    // what happened
	SchemaVersion int32     // 0 means 1
	Payload       any       // json.RawMessage or []byte (JSON text, sent as is) or a value to marshal; required
	Headers       any       // nil, map[string]string, json.RawMessage, or a value to marshal; Write adds the caller's trace context (see TraceContext)
	OccurredAt    time.Time // zero: the transaction's now()
}

// NewID returns a fresh event id: a time-ordered uuid (version 7).
func NewID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

// Writer inserts events into one outbox table.
type Writer struct {
	Table   string  // "schema.table" or "table"; empty means DefaultTable
	Mapping Mapping // its columns; the zero Mapping is the DeltaBus layout
	// Propagator writes the caller's trace context into the headers of
	// each event (tables with a headers column); nil means W3C Trace
	// Context and Baggage. See TraceContext.
	Propagator propagation.TextMapPropagator
	// Contracts, when set, validates each event's payload against its
	// contract before anything is sent (package contract: a registry
	// cache of the store, or a directory embedded in the service). An
	// event that breaks its contract fails Write with an error wrapping
	// the contract's violation (*contract.Violation: topic, type,
	// version, first failing JSON pointer), and nothing is inserted: the
	// caller's transaction should roll back.
	Contracts Contracts
}

// Contracts checks events against their contracts (package contract
// implements it).
type Contracts interface {
	// ValidateEvent returns nil when the event may be published, else an
	// error: the contract's violation, or a failure to read the registry.
	ValidateEvent(ctx context.Context, topic, typ string, version int32, payload []byte) error
}

// Write inserts events into DefaultTable within tx. See Writer.Write.
func Write(ctx context.Context, tx pgx.Tx, events ...NewEvent) error {
	return Writer{}.Write(ctx, tx, events...)
}

// Write inserts all events within tx in one statement (one round trip),
// in argument order, so they reach their topics in that order. Every
// event is checked first (topic name, id, JSON of payload and headers,
// and its contract when w.Contracts is set); if any is invalid nothing is
// sent and the error names the event. The
// caller's trace context (ctx) is recorded in each event's headers (see
// TraceContext). The events become visible to the relay when tx commits.
func (w Writer) Write(ctx context.Context, tx pgx.Tx, events ...NewEvent) error {
	if len(events) == 0 {
		return nil
	}
	m := w.Mapping.orDefault()
	if err := m.Validate(); err != nil {
		return err
	}
	cols, err := buildColumns(m, events)
	if err != nil {
		return err
	}
	if w.Contracts != nil {
		for i := range events {
			e := &events[i]
			if err := w.Contracts.ValidateEvent(ctx, e.Topic, e.Type, cols.versions[i], unsafe.Slice(unsafe.StringData(cols.payloads[i]), len(cols.payloads[i]))); err != nil {
				return fmt.Errorf("outbox event %d (topic %q, type %q): %w", i, e.Topic, e.Type, err)
			}
		}
	}
	if m.Headers != "" {
		if fields := w.traceFields(ctx); fields != nil {
			for i := range cols.headers {
				cols.headers[i] = withTraceFields(cols.headers[i], fields)
			}
		}
	}
	sql, args := w.insertSQL(m, cols)
	// QueryExecModeExec sends parse, bind and execute in one flight: no
	// separate prepare round trip, no statement cache entry.
	if _, err := tx.Exec(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...); err != nil {
		return fmt.Errorf("insert %d events into %s: %w", len(events), w.table(), err)
	}
	return nil
}

func (w Writer) table() string {
	if w.Table == "" {
		return DefaultTable
	}
	return w.Table
}

// columnsArgs holds the events column by column, as unnest arrays.
type columnArgs struct {
	ids, topics, keys, types, payloads []string
	versions                           []int32
	headers                            []*string
	occurred                           []*time.Time
}

func buildColumns(m Mapping, events []NewEvent) (*columnArgs, error) {
	n := len(events)
	c := &columnArgs{
		ids: make([]string, n), topics: make([]string, n), keys: make([]string, n), types: make([]string, n),
		payloads: make([]string, n), versions: make([]int32, n), headers: make([]*string, n), occurred: make([]*time.Time, n),
	}
	for i := range events {
		if err := c.set(i, m, &events[i]); err != nil {
			return nil, fmt.Errorf("outbox event %d (topic %q): %w", i, events[i].Topic, err)
		}
	}
	return c, nil
}

func (c *columnArgs) set(i int, m Mapping, e *NewEvent) error {
	if err := ValidTopic(e.Topic); err != nil {
		return err
	}
	c.ids[i] = e.ID
	if e.ID == "" {
		c.ids[i] = NewID()
	} else if !isUUID([]byte(e.ID)) {
		return fmt.Errorf("id %q is not a uuid", e.ID)
	}
	c.topics[i], c.keys[i], c.types[i] = e.Topic, e.Key, e.Type
	if e.SchemaVersion < 0 {
		return fmt.Errorf("schema version %d is negative", e.SchemaVersion)
	}
	c.versions[i] = max(e.SchemaVersion, 1)
	if e.Payload == nil {
		return errors.New("payload is required")
	}
	payload, err := jsonText(e.Payload)
	if err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	c.payloads[i] = payload
	if e.Headers != nil {
		h, err := jsonText(e.Headers)
		if err != nil {
			return fmt.Errorf("headers: %w", err)
		}
		c.headers[i] = &h
	}
	if !e.OccurredAt.IsZero() {
		at := e.OccurredAt
		c.occurred[i] = &at
	}
	return unmappedCheck(m, e)
}

// unmappedCheck refuses values that a table without the optional column
// would silently lose.
func unmappedCheck(m Mapping, e *NewEvent) error {
	switch {
	case m.SchemaVersion == "" && e.SchemaVersion > 1:
		return fmt.Errorf("schema version %d, but the table has no schema_version column", e.SchemaVersion)
	case m.Headers == "" && e.Headers != nil:
		return errors.New("headers, but the table has no headers column")
	case m.OccurredAt == "" && !e.OccurredAt.IsZero():
		return errors.New("occurred_at, but the table has no occurred_at column")
	}
	return nil
}

// jsonText returns v as JSON text: a json.RawMessage or []byte as is
// (checked: JSON text, never base64), anything else marshalled.
func jsonText(v any) (string, error) {
	var raw []byte
	switch r := v.(type) {
	case json.RawMessage:
		raw = r
	case []byte:
		raw = r
	}
	if raw != nil {
		if !json.Valid(raw) {
			return "", errors.New("payload/headers bytes are not valid JSON text")
		}
		return string(raw), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// insertSQL returns the INSERT ... SELECT FROM unnest(...) statement for
// the mapped columns, and its array arguments.
func (w Writer) insertSQL(m Mapping, c *columnArgs) (string, []any) {
	type col struct {
		name, typ, expr string
		arg             any
	}
	all := []col{
		{m.ID, "uuid", "", c.ids}, {m.Topic, "text", "", c.topics}, {m.Key, "text", "", c.keys},
		{m.Type, "text", "", c.types}, {m.SchemaVersion, "int4", "", c.versions}, {m.Payload, "jsonb", "", c.payloads},
		{m.Headers, "jsonb", "", c.headers}, {m.OccurredAt, "timestamptz", "coalesce(%s, now())", c.occurred},
	}
	var names, params, aliases, exprs []string
	var args []any
	for _, cl := range all {
		if cl.name == "" {
			continue
		}
		args = append(args, cl.arg)
		alias := fmt.Sprintf("c%d", len(args))
		names = append(names, pgx.Identifier{cl.name}.Sanitize())
		params = append(params, fmt.Sprintf("$%d::%s[]", len(args), cl.typ))
		aliases = append(aliases, alias)
		expr := "u." + alias
		if cl.expr != "" {
			expr = fmt.Sprintf(cl.expr, expr)
		}
		exprs = append(exprs, expr)
	}
	sql := fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM unnest(%s) WITH ORDINALITY AS u(%s, ord) ORDER BY u.ord",
		quoteTable(w.table()), strings.Join(names, ", "), strings.Join(exprs, ", "),
		strings.Join(params, ", "), strings.Join(aliases, ", "))
	return sql, args
}

// quoteTable quotes "schema.table" or "table".
func quoteTable(name string) string {
	if s, t, ok := strings.Cut(name, "."); ok {
		return pgx.Identifier{s, t}.Sanitize()
	}
	return pgx.Identifier{name}.Sanitize()
}
