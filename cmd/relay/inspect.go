package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/deltabus/deltabus/daemon"
	"github.com/deltabus/deltabus/sink/delta"
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
	for app, v := range r.Txns {
		fmt.Fprintf(tw, "txn\t%s=%d\n", app, v)
	}
	_ = tw.Flush()
}

func cmdTail(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "tail", "TABLE_URL [--from-version N] [--to-version M]")
	from := fs.Int64("from-version", 0, "first version of the change feed")
	to := fs.Int64("to-version", -1, "last version (default: latest)")
	_ = fs.Bool("json", true, "JSON lines (the only format)")
	nested := fs.String("json-columns", "payload,headers", "comma-separated string columns printed as nested JSON when they hold valid JSON (empty: none)")
	store, url, code, ok := tableArgs(ctx, env, fs, args)
	if !ok {
		return code
	}
	var cols []string
	for _, c := range strings.Split(*nested, ",") {
		if c = strings.TrimSpace(c); c != "" {
			cols = append(cols, c)
		}
	}
	if err := delta.TailJSON(ctx, store, *from, *to, env.stdout, cols); err != nil {
		return fail(env, exitUsage, fmt.Errorf("tail %s: %w", url, err))
	}
	return exitOK
}
