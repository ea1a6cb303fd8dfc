package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/daemon"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/topicmeta"
	"github.com/deltabus/deltabus/usererr"
)

// cmdTopics is `relay topics [--json]` and `relay topics describe`.
func cmdTopics(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) > 0 && args[0] == "describe" {
		return cmdTopicsDescribe(ctx, env, args[1:])
	}
	fs := newFlagSet(env, "topics", "[--json] | describe --topic T [--owner O] [--description D]")
	storeURL := fs.String("store", "", "store URL: file:///path or s3://bucket/prefix (default from DELTABUS_STORE)")
	asJSON := fs.Bool("json", false, "print JSON: every topic with its owner, description, table (and group), retention, columns, sources, contracts and personal columns, and every topic group")
	schemas := piiSchemasFlag(fs, env)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if err := describePersonal(*schemas); err != nil {
		return fail(env, exitUsage, err)
	}
	store, code, ok := openStoreFlag(ctx, env, *storeURL)
	if !ok {
		return code
	}
	l, err := topicmeta.LoadAll(ctx, store)
	if err != nil {
		return fail(env, exitFailure, err)
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(l)
		return exitOK
	}
	printTopics(env, l.Topics)
	return exitOK
}

func openStoreFlag(ctx context.Context, env *cliEnv, raw string) (storage.Store, int, bool) {
	if raw == "" {
		raw = env.getenv("DELTABUS_STORE")
	}
	if raw == "" {
		return nil, fail(env, exitUsage, usererr.New(nil, "no store: set DELTABUS_STORE or --store (file:///path or s3://bucket/prefix)")), false
	}
	store, err := daemon.OpenStore(ctx, raw, storage.S3Options{})
	if err != nil {
		return nil, fail(env, exitUsage, err), false
	}
	return store, 0, true
}

func printTopics(env *cliEnv, infos []topicmeta.Info) {
	if len(infos) == 0 {
		fmt.Fprintln(env.stdout, "no topics yet: the relay creates a topic's table with its first event")
		return
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tOWNER\tGROUP\tVERSION\tRECORDS\tLAST COMMIT\tLOG RETENTION\tSOURCES\tCONTRACTS\tPERSONAL\tDESCRIPTION")
	for _, in := range infos {
		last := "-"
		if !in.LastCommit.IsZero() {
			last = in.LastCommit.UTC().Format(time.RFC3339)
		}
		srcs := make([]string, 0, len(in.Sources))
		for _, s := range in.Sources {
			srcs = append(srcs, cmp.Or(s.Database, s.AppID))
		}
		desc := firstLine(in.Description)
		if in.Problem != "" {
			desc = strings.TrimSpace(desc + " [" + in.Problem + "]")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", in.Topic, cmp.Or(in.Owner, "-"), cmp.Or(in.Group, "-"), in.Version, in.RecordsText(), last,
			strings.TrimPrefix(in.LogRetention, "interval "), cmp.Or(strings.Join(srcs, ","), "-"),
			topicmeta.ContractsText(in.Contracts), topicmeta.PersonalText(in.PersonalColumns), cmp.Or(desc, "-"))
	}
	_ = tw.Flush()
}

func firstLine(s string) string {
	s, _, cut := strings.Cut(s, "\n")
	if len(s) > 80 {
		s, cut = s[:77], true
	}
	if cut {
		s += "…"
	}
	return s
}

// optString is a flag that records whether it was given (so --owner ""
// clears the owner, and an absent flag keeps it).
type optString struct {
	v   string
	set bool
}

func (o *optString) String() string     { return o.v }
func (o *optString) Set(s string) error { o.v, o.set = s, true; return nil }

func cmdTopicsDescribe(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "topics describe", "--topic T [--owner O] [--description D]")
	storeURL := fs.String("store", "", "store URL: file:///path or s3://bucket/prefix (default from DELTABUS_STORE)")
	name := fs.String("topic", "", "the topic (required)")
	var owner, desc optString
	fs.Var(&owner, "owner", "the owning team or person, e.g. team-checkout (\"\" clears it)")
	fs.Var(&desc, "description", "what the topic carries and for whom: the table's description in every Delta reader and in Unity Catalog (\"\" clears it)")
	schemas := piiSchemasFlag(fs, env)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *name == "" || (!owner.set && !desc.set) {
		return fail(env, exitUsage, usererr.New(nil, "want --topic T and at least one of --owner and --description"))
	}
	if err := describePersonal(*schemas); err != nil {
		return fail(env, exitUsage, err)
	}
	store, code, ok := openStoreFlag(ctx, env, *storeURL)
	if !ok {
		return code
	}
	m, _, err := catalog.ReadTopicMeta(ctx, store, *name)
	if err != nil {
		return fail(env, exitUsage, err)
	}
	m.Topic, m.Updated = *name, time.Time{}
	if owner.set {
		m.Owner = owner.v
	}
	if desc.set {
		m.Description = desc.v
	}
	if err := m.Check(); err != nil {
		return fail(env, exitUsage, usererr.New(err, "%v", err))
	}
	if err := catalog.WriteTopicMeta(ctx, store, m); err != nil {
		return fail(env, exitFailure, err)
	}
	in, err := topicmeta.LoadTopic(ctx, store, *name)
	if err != nil {
		return fail(env, exitFailure, err)
	}
	v, changed, err := topicmeta.Apply(ctx, store, in)
	switch {
	case errors.Is(err, topicmeta.ErrShared):
		return describedInGroup(ctx, env, store, in)
	case errors.Is(err, topicmeta.ErrNoTable):
		fmt.Fprintf(env.stdout, "topic %s described (owner %s); it has no table yet: `relay run` writes the description into the table once it exists\n", *name, cmp.Or(m.Owner, "none"))
	case err != nil:
		return fail(env, exitFailure, fmt.Errorf("the description is recorded in the catalog, but: %w", err))
	case changed:
		fmt.Fprintf(env.stdout, "topic %s described (owner %s); its table's metaData carries the description and column comments from version %d\n", *name, cmp.Or(m.Owner, "none"), v)
	default:
		fmt.Fprintf(env.stdout, "topic %s described (owner %s); its table already carried the description and column comments (version %d)\n", *name, cmp.Or(m.Owner, "none"), v)
	}
	return exitOK
}

// describedInGroup reports a grouped topic's description, kept in the
// catalog (the shared table's metaData describes the group, not its
// topics), and brings the group table's own description up to date.
func describedInGroup(ctx context.Context, env *cliEnv, store storage.Store, in topicmeta.Info) int {
	fmt.Fprintf(env.stdout, "topic %s described (owner %s); it shares group %s's table %s, whose metaData describes the group and its topics: the topic's owner and description are kept in the catalog (relay topics, the operator's page, Unity Catalog)\n",
		in.Topic, cmp.Or(in.Owner, "none"), in.Group, in.Table)
	gi, _, ok, err := topicmeta.LoadGroup(ctx, store, in.Group)
	if err != nil {
		return fail(env, exitFailure, fmt.Errorf("the description is recorded in the catalog, but: %w", err))
	}
	if !ok || gi.Version < 0 {
		return exitOK // no table yet: relay run describes it once it exists
	}
	v, changed, err := topicmeta.ApplyGroup(ctx, store, gi)
	switch {
	case errors.Is(err, topicmeta.ErrNoTable):
	case err != nil:
		return fail(env, exitFailure, fmt.Errorf("the description is recorded in the catalog, but: %w", err))
	case changed:
		fmt.Fprintf(env.stdout, "group %s's table carries the group's description and column comments from version %d\n", in.Group, v)
	}
	return exitOK
}
