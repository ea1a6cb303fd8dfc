package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/usererr"
)

// cmdRetention shows or sets a table's retention properties: a topic's
// own table, or a topic group's.
//
// Retention is a property of a table, and a group's table is shared by
// every topic of the group: setting it through one topic would silently
// set it for all of them (a short file retention asked for one topic's
// privacy would cut the recovery window of the others). So --topic of a
// grouped topic shows its group table's retention and refuses to set it,
// naming the --group form; --group G shows and sets it for the whole
// group, knowingly.
func cmdRetention(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "retention", "--topic T | --group G [--log D] [--files D]")
	var f maintainFlags
	f.register(fs)
	logRet := fs.Duration("log", 0, "keep the log (versions a reader can start from) this long: delta.logRetentionDuration (default 30 days)")
	fileRet := fs.Duration("files", 0, "keep removed data files this long: delta.deletedFileRetentionDuration (default 7 days)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if len(f.topics)+len(f.groups) != 1 {
		return fail(env, exitUsage, usererr.New(nil, "retention: give one --topic or one --group"))
	}
	if err := f.check(); err != nil {
		return fail(env, exitUsage, err)
	}
	props := map[string]string{}
	if *logRet > 0 {
		props[delta.PropLogRetention] = interval(*logRet)
	}
	if *fileRet > 0 {
		props[delta.PropDeletedFileRetention] = interval(*fileRet)
	}
	store, code, ok := openStoreFlag(ctx, env, f.store)
	if !ok {
		return code
	}
	table, what, err := retentionTable(ctx, store, f, len(props) > 0, *logRet, *fileRet)
	if err != nil {
		return fail(env, exitCode(err), err)
	}
	tbl, err := delta.OpenTable(ctx, storage.Sub(store, table), delta.Options{})
	if errors.Is(err, delta.ErrNoTable) {
		return fail(env, exitFailure, fmt.Errorf("%s has no table yet: the relay creates it with the first event", what))
	}
	if err != nil {
		return fail(env, exitFailure, err)
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
	fmt.Fprintf(env.stdout, "%s: %s = %s, %s = %s\n", what, delta.PropLogRetention, show(delta.PropLogRetention, delta.DefaultLogRetention),
		delta.PropDeletedFileRetention, show(delta.PropDeletedFileRetention, delta.DefaultDeletedFileRetention))
	return exitOK
}

// retentionTable returns the table whose retention the flags name and how
// to call it. Setting (set) the retention of a grouped topic's table is
// refused with one line naming the group's form of the command.
func retentionTable(ctx context.Context, store storage.Store, f maintainFlags, set bool, logRet, fileRet time.Duration) (table, what string, err error) {
	if len(f.groups) == 1 {
		g := f.groups[0]
		if err := f.checkGroups(ctx, store); err != nil {
			return "", "", err
		}
		table = catalog.GroupTable(g)
		return table, fmt.Sprintf("group %s (table %s, shared by its topics)", g, table), nil
	}
	name := f.topics[0]
	p, err := catalog.Locate(ctx, store, name)
	if err != nil {
		return "", "", err
	}
	if !p.Shared() {
		return p.Table, "topic " + name, nil
	}
	if set {
		form := "relay retention --group " + p.Group()
		if logRet > 0 {
			form += " --log " + shortDuration(logRet)
		}
		if fileRet > 0 {
			form += " --files " + shortDuration(fileRet)
		}
		return "", "", usererr.New(nil, "topic %s shares group %s's table with the group's other topics, and retention is the whole table's: set it for all of them with `%s`",
			name, p.Group(), form)
	}
	return p.Table, fmt.Sprintf("topic %s (group %s, table %s, shared by the group's topics)", name, p.Group(), p.Table), nil
}

// shortDuration prints d as a flag value, without time.Duration's trailing
// zero units ("720h", not "720h0m0s").
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
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
