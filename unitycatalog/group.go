package unitycatalog

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/deltabus/deltabus/topicmeta"
)

// A topic group's table is registered as one EXTERNAL Delta table, named
// as its folder is (catalog.GroupTable, "." becoming "_":
// _group_metrics), never as a table or a view per topic:
//   - an EXTERNAL table per topic would point at the shared location, so
//     each would show every topic's rows (and Databricks refuses tables
//     whose locations overlap);
//   - a view per topic (table_type VIEW, a view_definition "SELECT ...
//     WHERE topic = '...'") is SQL text that Unity Catalog OSS stores but
//     does not evaluate (its POST /tables creates EXTERNAL tables only),
//     so only an engine speaking that dialect could read it, and every new
//     topic would need one the relay would have to keep in step.
//
// Its comment is the group's description (topicmeta.GroupInfo.Description:
// its topics, and that readers of one topic filter WHERE topic = '...'),
// and its properties say it is a group, list its topics and gather what
// is each topic's: owners, contracts and personal columns, by topic.

// GroupTableFor is the registration of group g's table in catalog.schema;
// topics are the Infos of its registered topics (others are ignored).
func GroupTableFor(g topicmeta.GroupInfo, topics []topicmeta.Info, catalog, schema, version string) (CreateTable, error) {
	if g.Version < 0 || g.SchemaString() == "" {
		return CreateTable{}, fmt.Errorf("group %q has no table yet", g.Group)
	}
	cols, err := Columns(g.SchemaString())
	if err != nil {
		return CreateTable{}, fmt.Errorf("group %q: %w", g.Group, err)
	}
	var owners, contracts, personal []string
	for _, in := range topics {
		if in.Group != g.Group || !slices.Contains(g.Topics, in.Topic) {
			continue
		}
		if in.Owner != "" && !slices.Contains(owners, in.Owner) {
			owners = append(owners, in.Owner)
		}
		if len(in.Contracts) > 0 {
			contracts = append(contracts, in.Topic+": "+topicmeta.ContractsText(in.Contracts))
		}
		if len(in.PersonalColumns) > 0 {
			personal = append(personal, in.Topic+": "+topicmeta.PersonalText(in.PersonalColumns))
		}
	}
	sort.Strings(owners)
	sort.Strings(contracts)
	sort.Strings(personal)
	props := map[string]string{
		PropGroup:      g.Group,
		PropTopics:     strings.Join(g.Topics, ","),
		PropTopicCount: strconv.Itoa(len(g.Topics)),
		PropPatterns:   strings.Join(g.Patterns, ","),
		PropOwner:      strings.Join(owners, ", "),
		PropContract:   strings.Join(contracts, " | "),
		PropPersonal:   strings.Join(personal, " | "),
		PropSources:    sourcesText(g.Sources),
		PropVersion:    version,
	}
	return CreateTable{
		Name: TableName(g.Table), CatalogName: catalog, SchemaName: schema,
		TableType: "EXTERNAL", DataSourceFormat: "DELTA",
		Columns: cols, StorageLocation: g.Location, Comment: g.Description(), Properties: noneIfEmpty(props),
	}, nil
}
