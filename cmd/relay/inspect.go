package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

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
	return openStore(ctx, raw)
}

func cmdInspect(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "inspect", "TABLE_URL [--json]")
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitUsage
	}
	store, err := openTable(ctx, pos[0])
	if err != nil {
		return fail(env, exitUsage, err)
	}
	res, err := delta.Inspect(ctx, store)
	if err != nil {
		return fail(env, exitUsage, fmt.Errorf("inspect %s: %w", pos[0], err))
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
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitUsage
	}
	store, err := openTable(ctx, pos[0])
	if err != nil {
		return fail(env, exitUsage, err)
	}
	if err := delta.Tail(ctx, store, *from, *to, env.stdout); err != nil {
		return fail(env, exitUsage, fmt.Errorf("tail %s: %w", pos[0], err))
	}
	return exitOK
}
