package doctor

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/pgsource"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// checkGroups, when the store has topic groups (relay groups): every
// group's definition reads (the relay places a new topic by them), and
// each group table that registered topics live in is there, with the
// table id they were written to (otherwise the relay holds them until
// `relay rebuild`). Nothing is reported for a store without groups.
func checkGroups(ctx context.Context, o Options, st storage.Store, r *Report) {
	if st == nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	groups, err := catalog.ListGroups(cctx, st)
	if err != nil {
		r.add("topic_groups", Fail, "%s: the relay cannot place a new topic; fix or delete that definition under %sgroups/ (`relay groups list` shows the groups)",
			pgsource.RootCause(err), catalog.Prefix)
		return
	}
	if len(groups) == 0 {
		return
	}
	placed, problems, err := groupTables(cctx, st, groups)
	if err != nil {
		r.add("topic_groups", Fail, "read the topic registry of %s: %s", st, pgsource.RootCause(err))
		return
	}
	if len(problems) > 0 {
		r.add("topic_groups", Fail, "%s", strings.Join(problems, "; "))
		return
	}
	names := make([]string, len(groups))
	for i, g := range groups {
		names[i] = fmt.Sprintf("%s (%d topics)", g.Name, placed[catalog.GroupTable(g.Name)])
	}
	r.ok("topic_groups", "%d group(s) read, their tables hold their registered topics: %s", len(groups), strings.Join(names, ", "))
}

// groupTables counts the registered topics of each group table and says
// which of them the relay would hold: their table gone, unreadable, or
// replaced (another table id). Each group table is read once.
func groupTables(ctx context.Context, st storage.Store, groups []catalog.Group) (map[string]int, []string, error) {
	topics, err := catalog.ListTopics(ctx, st)
	if err != nil {
		return nil, nil, err
	}
	placed, held := map[string]int{}, map[string][]string{}
	ids := map[string]string{}
	for _, t := range topics {
		p, err := catalog.ReadPlacement(ctx, st, t, groups)
		if err != nil {
			return nil, nil, err
		}
		if !p.Shared() || !p.Registered {
			continue
		}
		placed[p.Table]++
		id, ok := ids[p.Table]
		if !ok {
			id = tableID(ctx, st, p.Table)
			ids[p.Table] = id
		}
		if id == "" || id == "?" || p.Replaced(id) {
			held[p.Table] = append(held[p.Table], t)
		}
	}
	var problems []string
	for table, ts := range held {
		why := "was replaced (another table id)"
		switch ids[table] {
		case "":
			why = "is missing"
		case "?":
			why = "cannot be read"
		}
		problems = append(problems, fmt.Sprintf("group table %s %s, so the relay holds its topics %s: `relay rebuild --topic T` restores each from the outbox",
			table, why, strings.Join(ts, ", ")))
	}
	sort.Strings(problems)
	return placed, problems, nil
}

// tableID is the table's metaData.id: "" when there is no table, "?"
// when it cannot be read.
func tableID(ctx context.Context, st storage.Store, table string) string {
	snap, err := delta.LoadSnapshot(ctx, storage.Sub(st, table), -1)
	switch {
	case errors.Is(err, delta.ErrNoTable):
		return ""
	case err != nil:
		return "?"
	}
	return snap.Metadata.ID
}
