package migrations

import (
	"bytes"
	"embed"
	"fmt"
	"strings"
	"text/template"

	"github.com/deltabus/deltabus/outbox"
	"github.com/jackc/pgx/v5"
)

// Options name the objects Apply creates and Check inspects.
type Options struct {
	Schema      string // schema of the outbox table; default "public"
	Table       string // outbox table name; default "outbox"
	Publication string // publication the relay reads; default "deltabus"
	// Mappings gives the outbox column layout of each table; the zero value
	// means the DeltaBus layout (outbox.DeltaBusMapping) everywhere.
	Mappings outbox.Mappings
}

func (o Options) withDefaults() Options {
	if o.Schema == "" {
		o.Schema = "public"
	}
	if o.Table == "" {
		o.Table = "outbox"
	}
	if o.Publication == "" {
		o.Publication = "deltabus"
	}
	return o
}

// qualified returns "schema.table" as written in reports and errors.
func (o Options) qualified() string { return o.Schema + "." + o.Table }

// Report lists what Apply did, one item per object, in order.
type Report struct {
	Items []Item
}

// Item is one object Apply looked at.
type Item struct {
	Changed bool   // Apply created or altered the object
	Message string // e.g. "created table public.outbox"
}

// Changed reports whether Apply changed anything.
func (r Report) Changed() bool {
	for _, it := range r.Items {
		if it.Changed {
			return true
		}
	}
	return false
}

// String returns the messages, one per line.
func (r Report) String() string {
	var b strings.Builder
	for _, it := range r.Items {
		b.WriteString(it.Message)
		b.WriteByte('\n')
	}
	return b.String()
}

func (r *Report) add(changed bool, format string, args ...any) {
	r.Items = append(r.Items, Item{Changed: changed, Message: fmt.Sprintf(format, args...)})
}

//go:embed sql/*.sql
var sqlFiles embed.FS

var templates = template.Must(template.ParseFS(sqlFiles, "sql/*.sql"))

// sqlNames holds the quoted identifiers the SQL templates use.
type sqlNames struct {
	Schema, Table, Index, IndexColumns, Publication string
}

func namesFor(o Options, m outbox.Mapping) sqlNames {
	idx := []string{pgx.Identifier{m.Topic}.Sanitize()}
	if m.OccurredAt != "" {
		idx = append(idx, pgx.Identifier{m.OccurredAt}.Sanitize())
	}
	return sqlNames{
		Schema:       pgx.Identifier{o.Schema}.Sanitize(),
		Table:        pgx.Identifier{o.Schema, o.Table}.Sanitize(),
		Index:        pgx.Identifier{indexName(o.Table, m)}.Sanitize(),
		IndexColumns: strings.Join(idx, ", "),
		Publication:  pgx.Identifier{o.Publication}.Sanitize(),
	}
}

// indexName is the name of the (topic, occurred_at) index, cut to
// PostgreSQL's 63-byte identifier limit the way the server would cut it.
func indexName(table string, m outbox.Mapping) string {
	suffix := "_" + m.Topic + "_idx"
	if m.OccurredAt != "" {
		suffix = "_" + m.Topic + "_" + m.OccurredAt + "_idx"
	}
	name := table + suffix
	if len(name) > 63 {
		name = name[:63]
		for len(name) > 0 && name[len(name)-1]&0xC0 == 0x80 { // do not split a UTF-8 sequence
			name = name[:len(name)-1]
		}
		if len(name) > 0 && name[len(name)-1] >= 0xC0 {
			name = name[:len(name)-1]
		}
	}
	return name
}

// render fills the SQL template file (e.g. "create_table.sql").
func render(file string, n sqlNames) (string, error) {
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, file, n); err != nil {
		return "", fmt.Errorf("render %s: %w", file, err)
	}
	return b.String(), nil
}
