package topicmeta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// Comments returns the comment each column of the topic's table should
// carry: DeltaBus's own text for its columns, and for payload also the
// contracts and personal fields the Info knows.
func (in *Info) Comments() map[string]string {
	c := topic.ColumnComments(in.IsDeadLetter())
	var extra []string
	if s := ContractsText(in.Contracts); s != "none" {
		extra = append(extra, "Contracts: "+s+".")
	}
	if s := PersonalText(in.PersonalColumns); s != "none" {
		extra = append(extra, "Personal fields: "+s+".")
	}
	if len(extra) > 0 {
		c["payload"] += " " + strings.Join(extra, " ")
	}
	return c
}

// ContractsText renders contracts as "OrderCreated v1-v3 (BACKWARD), ..."
// or "none".
func ContractsText(cs []Contract) string {
	if len(cs) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(cs))
	for _, c := range cs {
		vs := make([]string, len(c.Versions))
		for i, v := range c.Versions {
			vs[i] = "v" + strconv.Itoa(v)
		}
		s := c.Type + " " + strings.Join(vs, ",")
		if c.Compatibility != "" {
			s += " (" + c.Compatibility + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// PersonalText renders personal columns as "payload/email (OrderCreated v2), ..."
// or "none".
func PersonalText(ps []PersonalColumn) string {
	if len(ps) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(ps))
	for _, p := range ps {
		if p.Type == "" {
			parts = append(parts, p.Column+p.Pointer+" (keyed hash)")
			continue
		}
		parts = append(parts, fmt.Sprintf("%s%s (%s v%d)", p.Column, p.Pointer, p.Type, p.Version))
	}
	return strings.Join(parts, ", ")
}

// ErrNoTable: Apply found no table to write into (the topic has had no
// event yet); the description is applied once it has.
var ErrNoTable = errors.New("the topic has no table yet")

// Apply commits the Info's description (once the topic was described) and column
// comments into the topic table's metaData, unless it already carries
// them, and returns the table's version and whether it committed. The
// commit ("UPDATE TABLE METADATA") changes no column's name, type,
// nullability or other metadata, so a relay streaming into the table
// carries on through it. A topic of a group writes nothing (ErrShared):
// its group's table describes the group (ApplyGroup).
func Apply(ctx context.Context, store storage.Store, in Info) (version int64, changed bool, err error) {
	if in.Shared() {
		return -1, false, fmt.Errorf("topic %q lives in group %s's table %s, whose metaData describes the group; the topic's own description stays in the catalog: %w",
			in.Topic, in.Group, in.Table, ErrShared)
	}
	return apply(ctx, storage.Sub(store, in.Topic), "topic "+strconv.Quote(in.Topic), in.tableDescriptionWanted(), in.Comments())
}

// tableDescriptionWanted is the description the topic's table should
// carry; nil: leave it as another writer set it (never described).
func (in *Info) tableDescriptionWanted() *string {
	if in.Described.IsZero() {
		return nil
	}
	d := in.Description
	return &d
}

// apply commits description (nil: left as it is; "": cleared) and
// comments into the metaData of the table at st, what naming it in
// errors.
func apply(ctx context.Context, st storage.Store, what string, description *string, comments map[string]string) (int64, bool, error) {
	tbl, err := delta.OpenTable(ctx, st, delta.Options{})
	if errors.Is(err, delta.ErrNoTable) {
		return -1, false, ErrNoTable
	}
	if err != nil {
		return -1, false, fmt.Errorf("open %s table: %w", what, err)
	}
	if !needsUpdate(description, comments, tbl.Metadata()) {
		return tbl.Version(), false, nil
	}
	params := map[string]any{"columnComments": comments}
	if description != nil {
		params["description"] = *description
	}
	b, _ := json.Marshal(params)
	v, err := tbl.UpdateMetadata(ctx, delta.MetadataChange{
		Operation:           "UPDATE TABLE METADATA",
		OperationParameters: map[string]string{"metadataUpdate": string(b)},
		Update: func(m *delta.Metadata) error {
			if !needsUpdate(description, comments, *m) { // a concurrent describe got there first
				return nil
			}
			s, err := topic.WithComments(m.SchemaString, comments)
			if err != nil {
				return err
			}
			m.SchemaString = s
			if description != nil {
				m.Description = nil
				if *description != "" {
					d := *description
					m.Description = &d
				}
			}
			return nil
		},
	})
	if err != nil {
		return -1, false, fmt.Errorf("write description of %s into its table: %w", what, err)
	}
	return v, true, nil
}

// needsUpdate reports whether the table's metaData lacks description
// (nil: any will do) or one of comments. A topic never described
// leaves the table's description as another writer set it; once
// described, the table's follows it (an empty one clears it).
func needsUpdate(description *string, comments map[string]string, m delta.Metadata) bool {
	if description != nil && ptrOr(m.Description) != *description {
		return true
	}
	s, err := delta.ParseSchema(m.SchemaString)
	if err != nil {
		return false // not a schema we can comment; the relay reports it
	}
	for _, f := range s.Fields {
		c, _ := f.Metadata["comment"].(string)
		if w, ok := comments[f.Name]; ok && c != w {
			return true
		}
	}
	return false
}

// Pending lists the topics of infos whose own tables lack their
// description or comments, sorted (a group's: PendingGroups).
func Pending(infos []Info) []string {
	var out []string
	for _, in := range infos {
		if in.Version < 0 || in.schemaString == "" || in.Shared() {
			continue
		}
		if needsUpdate(in.tableDescriptionWanted(), in.Comments(), delta.Metadata{SchemaString: in.schemaString, Description: in.tableDescription}) {
			out = append(out, in.Topic)
		}
	}
	sort.Strings(out)
	return out
}

func ptrOr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
