package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/daemon"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// openTable opens a table URL (file:///path, s3://bucket/prefix, or a plain
// local path) as a store rooted at the table.
func openTable(ctx context.Context, raw string) (storage.Store, error) {
	if !strings.Contains(raw, "://") {
		abs, err := filepath.Abs(raw)
		if err != nil {
			return nil, err
		}
		raw = "file://" + abs
	}
	return daemon.OpenStore(ctx, raw, storage.S3Options{})
}

// tableArgs parses a command's flags and its one TABLE_URL argument and
// opens the table's store; ok is false when the command must exit with code.
func tableArgs(ctx context.Context, env *cliEnv, fs *flag.FlagSet, args []string) (st storage.Store, url string, code int, ok bool) {
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return nil, "", code, false
	}
	if len(pos) != 1 {
		fs.Usage()
		return nil, "", exitUsage, false
	}
	st, err := openTable(ctx, pos[0])
	if err != nil {
		return nil, "", fail(env, exitUsage, err), false
	}
	return st, pos[0], 0, true
}

func cmdInspect(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "inspect", "TABLE_URL [--json]")
	asJSON := fs.Bool("json", false, "print one JSON object")
	store, url, code, ok := tableArgs(ctx, env, fs, args)
	if !ok {
		return code
	}
	res, err := delta.Inspect(ctx, store)
	if err != nil {
		return fail(env, exitUsage, fmt.Errorf("inspect %s: %w", url, err))
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return fail(env, exitFailure, err)
		}
		return exitOK
	}
	printInspect(env, res)
	return exitOK
}

func printInspect(env *cliEnv, r delta.InspectResult) {
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "version\t%d\n", r.Version)
	fmt.Fprintf(tw, "protocol\treader %d, writer %d", r.Protocol.MinReaderVersion, r.Protocol.MinWriterVersion)
	if len(r.Protocol.ReaderFeatures) > 0 {
		fmt.Fprintf(tw, ", reader features %v", r.Protocol.ReaderFeatures)
	}
	if len(r.Protocol.WriterFeatures) > 0 {
		fmt.Fprintf(tw, ", writer features %v", r.Protocol.WriterFeatures)
	}
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "table id\t%s\n", r.Metadata.ID)
	fmt.Fprintf(tw, "schema\t%s\n", strings.Join(r.Metadata.Schema, ", "))
	fmt.Fprintf(tw, "partitioned by\t%v\n", r.Metadata.PartitionColumns)
	keys := make([]string, 0, len(r.Metadata.Configuration))
	for k := range r.Metadata.Configuration {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(tw, "config\t%s=%s\n", k, r.Metadata.Configuration[k])
	}
	fmt.Fprintf(tw, "files\t%d\n", r.NumFiles)
	if r.NumRecords != nil {
		fmt.Fprintf(tw, "records\t%d\n", *r.NumRecords)
	} else {
		fmt.Fprintln(tw, "records\tunknown (a file without stats is missing)")
	}
	// In a group's table one txn per topic and source: appId/topic.
	apps := make([]string, 0, len(r.Txns))
	for app := range r.Txns {
		apps = append(apps, app)
	}
	sort.Strings(apps)
	for _, app := range apps {
		fmt.Fprintf(tw, "txn\t%s=%d\n", app, r.Txns[app])
	}
	_ = tw.Flush()
}

const tailHelp = `TABLE_URL [--topic T] | --topic T [--store URL]  [--from-version N] [--to-version M]

Prints a Delta table's change feed as JSON lines, one per row. With --topic
and no TABLE_URL it prints topic T's rows from the table of --store that
holds them: the topic's own table, or its group's table (relay groups), of
which it reads only the files whose stats may hold T and prints only T's
rows. With TABLE_URL and --topic it prints the rows of that table whose
topic column is T. Versions (--from-version, --to-version, _commit_version)
are the table's: a group table's versions are shared by its topics.`

func cmdTail(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "tail", tailHelp)
	from := fs.Int64("from-version", 0, "first version of the change feed")
	to := fs.Int64("to-version", -1, "last version (default: latest)")
	_ = fs.Bool("json", true, "JSON lines (the only format)")
	nested := fs.String("json-columns", "payload,headers", "comma-separated string columns printed as nested JSON when they hold valid JSON (empty: none)")
	name := fs.String("topic", "", "print only this topic's rows (without TABLE_URL: from the table of --store that holds the topic)")
	storeURL := fs.String("store", "", "store URL, with --topic and no TABLE_URL: file:///path or s3://bucket/prefix (default from DELTABUS_STORE)")
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	var cols []string
	for _, c := range strings.Split(*nested, ",") {
		if c = strings.TrimSpace(c); c != "" {
			cols = append(cols, c)
		}
	}
	st, what, filter, err := tailTarget(ctx, env, pos, *name, *storeURL)
	if errors.Is(err, errUsage) {
		fs.Usage()
		return exitUsage
	}
	if err != nil {
		return fail(env, exitUsage, err)
	}
	if err := delta.TailJSONFiltered(ctx, st, *from, *to, env.stdout, cols, filter); err != nil {
		return fail(env, exitUsage, fmt.Errorf("tail %s: %w", what, err))
	}
	return exitOK
}

// errUsage: the arguments do not name what to tail.
var errUsage = errors.New("usage")

// tailTarget opens what `relay tail` reads: the table TABLE_URL names, or
// the table of the store that holds topic name; filter keeps name's rows.
func tailTarget(ctx context.Context, env *cliEnv, pos []string, name, storeURL string) (storage.Store, string, delta.TailFilter, error) {
	var none delta.TailFilter
	if name != "" {
		if err := catalog.CheckName("topic", name); err != nil {
			return nil, "", none, fmt.Errorf("--topic: %w", err)
		}
	}
	switch {
	case len(pos) > 1 || len(pos) == 0 && name == "":
		return nil, "", none, errUsage
	case len(pos) == 1 && storeURL != "":
		return nil, "", none, errors.New("give TABLE_URL or --store, not both: --store with --topic finds the topic's table")
	case len(pos) == 1:
		st, err := openTable(ctx, pos[0])
		if err != nil || name == "" {
			return st, pos[0], none, err
		}
		return st, pos[0], topicRows(name), nil
	}
	if storeURL == "" {
		storeURL = env.getenv("DELTABUS_STORE")
	}
	if storeURL == "" {
		return nil, "", none, errors.New("relay tail --topic needs the store: give --store file:///path or s3://bucket/prefix, or set DELTABUS_STORE (or give a TABLE_URL)")
	}
	store, err := daemon.OpenStore(ctx, storeURL, storage.S3Options{})
	if err != nil {
		return nil, "", none, err
	}
	p, err := catalog.Locate(ctx, store, name)
	if err != nil {
		return nil, "", none, err
	}
	what := fmt.Sprintf("topic %q (table %s of %s)", name, p.Table, store)
	if !p.Registered && !strings.HasPrefix(name, "_") {
		return nil, "", none, fmt.Errorf("topic %q is not registered in %s: the relay has committed none of its events (relay topics lists the topics)", name, store)
	}
	if !p.Shared() {
		return storage.Sub(store, p.Table), what, none, nil
	}
	return storage.Sub(store, p.Table), what, topicRows(name), nil
}

// topicRows keeps the rows of one topic: files whose stats exclude it are
// not read (sink/topic.MayHold), rows of other topics not printed.
func topicRows(name string) delta.TailFilter {
	return delta.TailFilter{
		File: func(cf delta.ChangeFile) bool { return topic.MayHold(cf.Stats, name) },
		Row: func(row []delta.RowField) bool {
			for _, f := range row {
				if f.Name == "topic" {
					return f.Value == name
				}
			}
			return false
		},
	}
}
