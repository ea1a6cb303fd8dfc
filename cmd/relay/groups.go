package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/usererr"
)

// cmdGroups is `relay groups [--json]` and `relay groups create`.
func cmdGroups(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) > 0 && args[0] == "create" {
		return cmdGroupsCreate(ctx, env, args[1:])
	}
	fs := newFlagSet(env, "groups", "[--json] | create NAME --topics PATTERNS [--commit-interval D]")
	storeURL := fs.String("store", "", "store URL: file:///path or s3://bucket/prefix (default from DELTABUS_STORE)")
	asJSON := fs.Bool("json", false, "print JSON: every group with its table, patterns, commit interval and topics")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	store, code, ok := openStoreFlag(ctx, env, *storeURL)
	if !ok {
		return code
	}
	infos, err := loadGroups(ctx, store)
	if err != nil {
		return fail(env, exitFailure, err)
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(map[string]any{"groups": infos})
		return exitOK
	}
	if len(infos) == 0 {
		fmt.Fprintln(env.stdout, "no topic groups: every topic has its own table (`relay groups create NAME --topics 'metrics.*'` makes one)")
		return exitOK
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTABLE\tPATTERNS\tCOMMIT INTERVAL\tTOPICS")
	for _, in := range infos {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", in.Group, in.Table, strings.Join(in.Patterns, ","),
			cmp.Or(in.CommitInterval, "relay's"), cmp.Or(strings.Join(in.Members, ","), "-"))
	}
	_ = tw.Flush()
	return exitOK
}

// groupInfo is a group as `relay groups` shows it.
type groupInfo struct {
	Group          string   `json:"group"`
	Table          string   `json:"table"`
	Patterns       []string `json:"patterns"`
	CommitInterval string   `json:"commitInterval,omitempty"`
	Members        []string `json:"topics"` // registered topics that live in its table
}

// loadGroups reads every group and the registered topics each holds.
func loadGroups(ctx context.Context, store storage.Store) ([]groupInfo, error) {
	groups, err := catalog.ListGroups(ctx, store)
	if err != nil {
		return nil, err
	}
	topics, err := catalog.ListTopics(ctx, store)
	if err != nil {
		return nil, err
	}
	members := map[string][]string{}
	for _, t := range topics {
		p, err := catalog.ReadPlacement(ctx, store, t, nil)
		if err != nil {
			return nil, err
		}
		if p.Shared() {
			members[p.Table] = append(members[p.Table], t)
		}
	}
	out := make([]groupInfo, 0, len(groups))
	for _, g := range groups {
		table := catalog.GroupTable(g.Name)
		out = append(out, groupInfo{Group: g.Name, Table: table, Patterns: g.Topics, CommitInterval: g.CommitInterval,
			Members: append([]string{}, members[table]...)})
	}
	return out, nil
}

// cmdGroupsCreate is `relay groups create NAME --topics PATTERNS`.
func cmdGroupsCreate(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "groups create", "NAME --topics PATTERNS [--commit-interval D]")
	storeURL := fs.String("store", "", "store URL: file:///path or s3://bucket/prefix (default from DELTABUS_STORE)")
	topics := fs.String("topics", "", "comma-separated patterns of topic names whose events share the group's table ('*' any run of characters, '?' one, '[a-z]' a class), e.g. 'metrics.*,audit.*'")
	interval := fs.Duration("commit-interval", 0, "shortest time between two commits of the group's table by one relay (on S3 each commit is about 2 PUTs for all its topics); 0 = the relay's --topic-commit-interval")
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return fail(env, exitUsage, usererr.New(nil, "groups create takes one group name, e.g. `relay groups create metrics --topics 'metrics.*'`"))
	}
	g := catalog.Group{Name: pos[0], Created: time.Now().UTC()}
	for _, p := range strings.Split(*topics, ",") {
		if p = strings.TrimSpace(p); p != "" {
			g.Topics = append(g.Topics, p)
		}
	}
	if *interval != 0 {
		g.CommitInterval = interval.String()
	}
	if err := g.Check(); err != nil {
		return fail(env, exitUsage, usererr.New(err, "%v", err))
	}
	store, code, ok := openStoreFlag(ctx, env, *storeURL)
	if !ok {
		return code
	}
	kept, err := ownTables(ctx, store, g)
	if err != nil {
		return fail(env, exitFailure, err)
	}
	if err := catalog.WriteGroup(ctx, store, g); err != nil {
		return fail(env, exitUsage, usererr.New(err, "%v", err))
	}
	fmt.Fprintf(env.stdout, "group %s: new topics matching %s share the table %s\n", g.Name, strings.Join(g.Topics, ","), catalog.GroupTable(g.Name))
	if len(kept) > 0 {
		fmt.Fprintf(env.stdout, "%d topics matching it already have their own tables and keep them: %s\n", len(kept), strings.Join(kept, ","))
	}
	return exitOK
}

// ownTables lists the registered topics the group matches that already
// live elsewhere: a group places only topics not yet registered.
func ownTables(ctx context.Context, store storage.Store, g catalog.Group) ([]string, error) {
	topics, err := catalog.ListTopics(ctx, store)
	if err != nil {
		return nil, err
	}
	var kept []string
	for _, t := range topics {
		if !g.Matches(t) {
			continue
		}
		p, err := catalog.ReadPlacement(ctx, store, t, nil)
		if err != nil {
			return nil, err
		}
		if p.Table != catalog.GroupTable(g.Name) {
			kept = append(kept, t)
		}
	}
	return kept, nil
}
