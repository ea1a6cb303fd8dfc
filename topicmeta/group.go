package topicmeta

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// GroupInfo is a topic group's shared table: what `relay catalog sync`
// registers in Unity Catalog for the group and what ApplyGroup writes
// into the table's metaData.
type GroupInfo struct {
	Group    string   `json:"group"`
	Table    string   `json:"table"`    // catalog.GroupTable(Group)
	Patterns []string `json:"patterns"` // the group's topic patterns
	Topics   []string `json:"topics"`   // the registered topics it holds, sorted

	Location      string    `json:"location"`
	Version       int64     `json:"version"` // -1: no table yet
	Records       int64     `json:"records"` // of all its topics
	LastCommit    time.Time `json:"lastCommit,omitzero"`
	LogRetention  string    `json:"logRetention,omitempty"`
	FileRetention string    `json:"fileRetention,omitempty"`
	Columns       []Column  `json:"columns,omitempty"`
	// Sources are the relays with a txn of one of its topics; TxnLSN is
	// the newest position among them.
	Sources []Source `json:"sources"`
	Problem string   `json:"problem,omitempty"`

	schemaString     string
	tableDescription *string
}

// SchemaString is the table's schemaString ("" without a table).
func (g *GroupInfo) SchemaString() string { return g.schemaString }

// group describes g's table, holding the registered topics members.
func (ld *loader) group(ctx context.Context, g catalog.Group, members []string) (GroupInfo, error) {
	table := catalog.GroupTable(g.Name)
	gi := GroupInfo{Group: g.Name, Table: table, Patterns: g.Topics, Topics: append([]string{}, members...),
		Location: storage.Sub(ld.store, table).String(), Version: -1, Sources: []Source{}}
	sort.Strings(gi.Topics)
	t, err := ld.table(ctx, table)
	if err != nil {
		return gi, err
	}
	switch {
	case errors.Is(t.err, delta.ErrNoTable) && len(members) > 0:
		gi.Problem = "the table is missing: the events of its topics are gone"
	case errors.Is(t.err, delta.ErrNoTable):
		gi.Problem = "no table yet: the relay creates it with the first event of one of its topics"
	case t.err != nil:
		gi.Problem = fmt.Sprintf("table unreadable: %v", t.err)
	default:
		snap := t.snap
		gi.Version, gi.Records, gi.LastCommit = snap.Version, snap.StatsRecords(), snap.CommitTime
		gi.schemaString, gi.tableDescription = snap.Metadata.SchemaString, snap.Metadata.Description
		gi.LogRetention, gi.FileRetention = retention(snap)
		gi.Columns = columns(snap.Metadata.SchemaString)
		newest := map[string]delta.Txn{}
		for appID, txn := range snap.Txns {
			if catalog.IsRepublishTxn(appID) {
				continue // a redrive's or repair's counter, no source's position
			}
			app, _, _ := catalog.SplitTxnAppID(appID)
			if cur, ok := newest[app]; !ok || txn.Version > cur.Version {
				newest[app] = txn
			}
		}
		for app, txn := range newest {
			gi.Sources = append(gi.Sources, ld.source(app, txn))
		}
		sortSources(gi.Sources)
	}
	return gi, nil
}

// maxListed bounds the topics a group's description names.
const maxListed = 50

// Description is the group table's own description (its metaData's, and
// its Unity Catalog comment): the group, its topics and how to read one.
// It names no topic's own description or owner: those are the topic's,
// and stay in the catalog (`relay topics`).
func (g *GroupInfo) Description() string {
	var b strings.Builder
	fmt.Fprintf(&b, "DeltaBus topic group %s: the events of %d topics share this table, its topic column telling them apart; read one topic with WHERE topic = '%s'.",
		g.Group, len(g.Topics), cmp(firstOr(g.Topics, ""), "<topic>"))
	if len(g.Topics) > 0 {
		listed := g.Topics[:min(len(g.Topics), maxListed)]
		fmt.Fprintf(&b, " Topics: %s", strings.Join(listed, ", "))
		if more := len(g.Topics) - len(listed); more > 0 {
			fmt.Fprintf(&b, " and %d more", more)
		}
		b.WriteString(".")
	}
	fmt.Fprintf(&b, " New topics matching %s join it with their first event. Each topic's owner and description: relay topics.", strings.Join(g.Patterns, ", "))
	return b.String()
}

// Comments returns the comment each column of the group's table carries:
// DeltaBus's own text, the topic column's saying how to read one topic.
// Contracts and personal fields are each topic's (`relay topics`, and
// the Unity Catalog properties of the group's table), not the table's.
func (g *GroupInfo) Comments() map[string]string {
	c := topic.ColumnComments(false)
	c["topic"] += fmt.Sprintf(" This table holds the topics of group %s: read one with WHERE topic = '<topic>'.", g.Group)
	return c
}

// ErrShared: the topic lives in its group's table, whose metaData
// describes the group (ApplyGroup); the topic's own description stays in
// the catalog.
var ErrShared = errors.New("the topic shares its group's table")

// ApplyGroup commits the group's description and column comments into
// its table's metaData, unless it already carries them, and returns the
// table's version and whether it committed. Like Apply, the commit
// changes no column's structure: the relays writing the table stream on.
func ApplyGroup(ctx context.Context, store storage.Store, g GroupInfo) (version int64, changed bool, err error) {
	d := g.Description()
	return apply(ctx, storage.Sub(store, g.Table), "group "+g.Group, &d, g.Comments())
}

// PendingGroups lists the groups of gs whose tables lack their
// description or comments, sorted.
func PendingGroups(gs []GroupInfo) []string {
	var out []string
	for _, g := range gs {
		if g.Version < 0 || g.schemaString == "" {
			continue
		}
		d := g.Description()
		if needsUpdate(&d, g.Comments(), delta.Metadata{SchemaString: g.schemaString, Description: g.tableDescription}) {
			out = append(out, g.Group)
		}
	}
	sort.Strings(out)
	return out
}

func firstOr(s []string, def string) string {
	if len(s) == 0 {
		return def
	}
	return s[0]
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
