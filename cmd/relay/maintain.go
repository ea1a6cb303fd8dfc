package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/daemon"
	"github.com/deltabus/deltabus/maintain"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/usererr"
)

// maintainFlags are the flags of compact, vacuum and retention.
type maintainFlags struct {
	store          string
	topics, groups stringList
	asJSON         bool
}

func (f *maintainFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.store, "store", "", "store URL: file:///path or s3://bucket/prefix (default from DELTABUS_STORE)")
	fs.Var(&f.topics, "topic", "only this topic's table, its group's when the topic is in a group (repeatable; default every table)")
	fs.Var(&f.groups, "group", "only this topic group's table (repeatable)")
	fs.BoolVar(&f.asJSON, "json", false, "print the report as JSON")
}

// check refuses names that cannot be topics or groups: one line, before
// anything is read or written.
func (f *maintainFlags) check() error {
	for _, t := range f.topics {
		if err := catalog.CheckName("topic", t); err != nil {
			return usererr.New(err, "%v", err)
		}
	}
	for _, g := range f.groups {
		if err := (catalog.Group{Name: g, Topics: []string{"x"}}).Check(); err != nil {
			return usererr.New(err, "%v", err)
		}
	}
	return nil
}

// checkGroups refuses a --group the store does not define.
func (f *maintainFlags) checkGroups(ctx context.Context, store storage.Store) error {
	for _, g := range f.groups {
		if _, ok, err := catalog.ReadGroup(ctx, store, g); err != nil {
			return err
		} else if !ok {
			return usererr.New(nil, "no topic group %q in %s: `relay groups` lists the groups", g, store)
		}
	}
	return nil
}

// cmdCompact bin-packs small files of the tables (OPTIMIZE commits that
// change no data; the relay's appends go on meanwhile); a group's table
// into files of one topic each.
func cmdCompact(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "compact", "[--topic T ...] [--group G ...] [--target-file-bytes N] [flags]")
	var f maintainFlags
	f.register(fs)
	target := fs.Int64("target-file-bytes", 0, "size of the files compaction writes (default 128 MiB)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	opts := maintain.Options{SkipCleanup: true, SkipVacuum: true}
	opts.Compact.TargetFileBytes = *target
	return runMaintain(ctx, env, f, opts)
}

// cmdVacuum deletes expired log entries and data files no reader within the
// retention needs.
func cmdVacuum(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "vacuum", "[--topic T ...] [--group G ...] [--dry-run] [flags]")
	var f maintainFlags
	f.register(fs)
	var opts maintain.Options
	fs.BoolVar(&opts.DryRun, "dry-run", false, "list what would be deleted, delete nothing")
	fs.DurationVar(&opts.LogRetention, "log-retention", 0, "override each table's delta.logRetentionDuration (default 30 days)")
	fs.DurationVar(&opts.FileRetention, "file-retention", 0, "override each table's delta.deletedFileRetentionDuration (default 7 days)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	opts.SkipCompact = true
	return runMaintain(ctx, env, f, opts)
}

func runMaintain(ctx context.Context, env *cliEnv, f maintainFlags, opts maintain.Options) int {
	if err := f.check(); err != nil {
		return fail(env, exitUsage, err)
	}
	if f.store == "" {
		f.store = env.getenv("DELTABUS_STORE")
	}
	log, err := newLogger(env.stderr, envOr(env, "DELTABUS_LOG_FORMAT", "text"), envOr(env, "DELTABUS_LOG_LEVEL", "warn"))
	if err != nil {
		return fail(env, exitUsage, err)
	}
	store, err := daemon.OpenStore(ctx, f.store, storage.S3Options{Logger: log})
	if err != nil {
		return fail(env, exitUsage, err)
	}
	if err := f.checkGroups(ctx, store); err != nil {
		return fail(env, exitCode(err), err)
	}
	opts.Topics, opts.Groups, opts.Logger = f.topics, f.groups, log
	rep, err := maintain.Run(ctx, store, opts)
	if err != nil {
		return fail(env, exitFailure, err)
	}
	if f.asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintln(env.stdout, string(b))
	} else {
		printMaintain(env, rep, opts.DryRun)
	}
	if rep.Failed() {
		return exitFailure
	}
	return exitOK
}

// exitCode is exitUsage for an error the operator must fix, else exitFailure.
func exitCode(err error) int {
	if usererr.Is(err) {
		return exitUsage
	}
	return exitFailure
}

func printMaintain(env *cliEnv, rep maintain.Report, dry bool) {
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	deleted := "DELETED"
	if dry {
		deleted = "WOULD DELETE"
	}
	fmt.Fprintf(tw, "TABLE\tGROUP\tCOMPACTED\tWRITTEN\tLOG %s\tFILES %s\tEARLIEST VERSION\tNOTE\n", deleted, deleted)
	for _, t := range rep.Tables {
		note := t.Skipped
		if len(t.Errors) > 0 {
			note = strings.Join(t.Errors, "; ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", t.Table, cmp.Or(t.Group, "-"), t.Compacted, t.Written, t.LogDeleted,
			t.FilesDeleted, t.Earliest, note)
	}
	_ = tw.Flush()
}
