package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/deltabus/deltabus/daemon"
	"github.com/deltabus/deltabus/maintain"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// maintainFlags are the flags of compact and vacuum.
type maintainFlags struct {
	store  string
	topics stringList
	asJSON bool
}

func (f *maintainFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.store, "store", "", "store URL: file:///path or s3://bucket/prefix (default from DELTABUS_STORE)")
	fs.Var(&f.topics, "topic", "only this topic (repeatable; default every registered topic)")
	fs.BoolVar(&f.asJSON, "json", false, "print the report as JSON")
}

// cmdCompact bin-packs small files of the topic tables (OPTIMIZE commits
// that change no data; the relay's appends go on meanwhile).
func cmdCompact(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "compact", "[--topic T ...] [--target-file-bytes N] [flags]")
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
	fs := newFlagSet(env, "vacuum", "[--topic T ...] [--dry-run] [flags]")
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
	opts.Topics, opts.Logger = f.topics, log
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

func printMaintain(env *cliEnv, rep maintain.Report, dry bool) {
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	deleted := "DELETED"
	if dry {
		deleted = "WOULD DELETE"
	}
	fmt.Fprintf(tw, "TOPIC\tCOMPACTED\tWRITTEN\tLOG %s\tFILES %s\tEARLIEST VERSION\tNOTE\n", deleted, deleted)
	for _, t := range rep.Topics {
		note := t.Skipped
		if len(t.Errors) > 0 {
			note = strings.Join(t.Errors, "; ")
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\n", t.Topic, t.Compacted, t.Written, t.LogDeleted, t.FilesDeleted, t.Earliest, note)
	}
	_ = tw.Flush()
}

// cmdRetention shows or sets a topic table's retention properties.
func cmdRetention(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "retention", "--topic T [--log D] [--files D]")
	var f maintainFlags
	f.register(fs)
	logRet := fs.Duration("log", 0, "keep the log (versions a reader can start from) this long: delta.logRetentionDuration (default 30 days)")
	fileRet := fs.Duration("files", 0, "keep removed data files this long: delta.deletedFileRetentionDuration (default 7 days)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if len(f.topics) != 1 {
		return fail(env, exitUsage, errors.New("retention: give exactly one --topic"))
	}
	if f.store == "" {
		f.store = env.getenv("DELTABUS_STORE")
	}
	store, err := daemon.OpenStore(ctx, f.store, storage.S3Options{})
	if err != nil {
		return fail(env, exitUsage, err)
	}
	tbl, err := delta.OpenTable(ctx, storage.Sub(store, f.topics[0]), delta.Options{})
	if err != nil {
		return fail(env, exitFailure, err)
	}
	props := map[string]string{}
	if *logRet > 0 {
		props[delta.PropLogRetention] = interval(*logRet)
	}
	if *fileRet > 0 {
		props[delta.PropDeletedFileRetention] = interval(*fileRet)
	}
	if len(props) > 0 {
		if _, err := delta.SetProperties(ctx, tbl, props); err != nil {
			return fail(env, exitUsage, err)
		}
	}
	cfg := tbl.Metadata().Configuration
	show := func(key string, def time.Duration) string {
		if v, ok := cfg[key]; ok {
			return v
		}
		return interval(def) + " (default)"
	}
	fmt.Fprintf(env.stdout, "topic %s: %s = %s, %s = %s\n", f.topics[0], delta.PropLogRetention, show(delta.PropLogRetention, delta.DefaultLogRetention),
		delta.PropDeletedFileRetention, show(delta.PropDeletedFileRetention, delta.DefaultDeletedFileRetention))
	return exitOK
}

// interval renders a duration as Delta's "interval N <unit>" property form.
func interval(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("interval %d days", d/(24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("interval %d hours", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("interval %d minutes", d/time.Minute)
	}
	return fmt.Sprintf("interval %d seconds", d/time.Second)
}
