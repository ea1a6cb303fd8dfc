package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/deadletter"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/republish"
	"github.com/deltabus/deltabus/usererr"
)

const deadletterHelp = `list | show ID | redrive | release [flags]

Dead letters are outbox rows that could not become events of their topic
(a mapping that cannot read them, a contract that refuses them): they sit in
the _dead_letter table with the reason. Once the producer, the contract or
the mapping is fixed:

  relay deadletter list [--topic T] [--reason TEXT] [--since T] [--until T]
      each dead letter with its state (dead, redriven, still failing) and its
      latest reason
  relay deadletter show ID
      one dead letter whole, with every redrive that considered it
  relay deadletter redrive --topic T [--type X] [--reason TEXT] [--id ID] [--since T --until T] [--dry-run]
      publish the chosen dead letters their topic now admits into it, each
      with its event id, source, commit_lsn and seq, in commit order, exactly
      once (a second redrive finds them present); those that still fail stay
      and the run records their new reason. Each run is recorded: who
      (--actor, else the OS user), when, how many, which ids (the
      _republished table), and shown on the operator's page.
  relay deadletter release --topic T [--disarm 1h]
      resume a topic the relay's circuit breaker holds (too many of its
      events refused in a minute): fix the cause first, or --disarm the
      breaker for a while so that such events go to _dead_letter again`

func cmdDeadletter(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 {
		fmt.Fprintf(env.stderr, "Usage: relay deadletter %s\n", deadletterHelp)
		return exitUsage
	}
	switch args[0] {
	case "list":
		return cmdDeadletterList(ctx, env, args[1:])
	case "show":
		return cmdDeadletterShow(ctx, env, args[1:])
	case "redrive":
		return cmdDeadletterRedrive(ctx, env, args[1:])
	case "release":
		return cmdDeadletterRelease(ctx, env, args[1:])
	case "-h", "--help", "help":
		fmt.Fprintf(env.stdout, "Usage: relay deadletter %s\n", deadletterHelp)
		return exitOK
	}
	fmt.Fprintf(env.stderr, "relay deadletter: unknown subcommand %q (list, show, redrive, release)\n", args[0])
	return exitUsage
}

// filterFlags are the dead-letter selection flags.
type filterFlags struct {
	topics, types, ids, sources stringList
	reason, since, until        string
}

func (f *filterFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.topics, "topic", "dead letters of this topic (repeatable)")
	fs.Var(&f.types, "type", "dead letters of this event type (repeatable)")
	fs.Var(&f.ids, "id", "this dead letter (its id; repeatable)")
	fs.Var(&f.sources, "relay", "dead letters the relay of this appId (its source) wrote (repeatable)")
	fs.StringVar(&f.reason, "reason", "", "dead letters whose reason (or latest reason) contains this text")
	fs.StringVar(&f.since, "since", "", "dead letters of rows committed at or after this time (RFC 3339, or a duration ago such as 24h)")
	fs.StringVar(&f.until, "until", "", "dead letters of rows committed before this time (RFC 3339, or a duration ago)")
}

func (f *filterFlags) filter(now time.Time) (deadletter.Filter, error) {
	out := deadletter.Filter{Topics: f.topics, Types: f.types, IDs: f.ids, Sources: f.sources, Reason: f.reason}
	var err error
	if out.Since, err = parseWhen("--since", f.since, now); err != nil {
		return out, err
	}
	if out.Until, err = parseWhen("--until", f.until, now); err != nil {
		return out, err
	}
	return out, nil
}

// String describes the selection for a run's record.
func (f *filterFlags) String() string {
	var parts []string
	add := func(flag string, vals ...string) {
		for _, v := range vals {
			if v != "" {
				parts = append(parts, flag+" "+v)
			}
		}
	}
	add("--topic", f.topics...)
	add("--type", f.types...)
	add("--id", f.ids...)
	add("--relay", f.sources...)
	add("--reason", f.reason)
	add("--since", f.since)
	add("--until", f.until)
	if len(parts) == 0 {
		return "every dead letter"
	}
	return strings.Join(parts, " ")
}

// parseWhen reads a time: RFC 3339, or a duration before now.
func parseWhen(flag, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, usererr.New(err, "%s %q: want RFC 3339 (2026-01-02T15:00:00Z) or a duration ago (24h)", flag, s)
	}
	return t, nil
}

func cmdDeadletterList(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "deadletter list", "[--topic T] [--reason TEXT] [--since T] [--until T] [--json]")
	storeURL := fs.String("store", "", "store URL: file:///path or s3://bucket/prefix (default from DELTABUS_STORE)")
	var ff filterFlags
	ff.register(fs)
	asJSON := fs.Bool("json", false, "print one JSON object per dead letter")
	limit := fs.Int("limit", 1000, "print at most this many (the newest last); 0 = all")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	f, err := ff.filter(time.Now())
	if err != nil {
		return fail(env, exitUsage, err)
	}
	store, code, ok := openStoreFlag(ctx, env, *storeURL)
	if !ok {
		return code
	}
	letters, err := deadletter.Read(ctx, store, f)
	if err != nil {
		return fail(env, exitFailure, err)
	}
	sort.SliceStable(letters, func(i, j int) bool { return letters[i].CommitTime.Before(letters[j].CommitTime) })
	if *limit > 0 && len(letters) > *limit {
		letters = letters[len(letters)-*limit:]
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		for _, l := range letters {
			_ = enc.Encode(letterJSON(l, false))
		}
		return exitOK
	}
	if len(letters) == 0 {
		fmt.Fprintln(env.stdout, "no dead letters match")
		return exitOK
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMMITTED\tTOPIC\tTYPE\tID\tSTATE\tREASON")
	for _, l := range letters {
		reason := l.CurrentReason()
		if l.Redriven() {
			reason = fmt.Sprintf("in %s since run %s (%s)", l.Latest.Topic, l.Latest.RunID, l.Latest.RunAt.Format(time.RFC3339))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", l.CommitTime.Format(time.RFC3339), orDash(l.Topic), orDash(l.Type), l.ID, l.State(), squeeze(reason, 160))
	}
	_ = tw.Flush()
	return exitOK
}

func cmdDeadletterShow(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "deadletter show", "ID [--store URL]")
	storeURL := fs.String("store", "", "store URL: file:///path or s3://bucket/prefix (default from DELTABUS_STORE)")
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return fail(env, exitUsage, usererr.New(nil, "relay deadletter show takes one dead letter id (relay deadletter list shows them)"))
	}
	store, code, ok := openStoreFlag(ctx, env, *storeURL)
	if !ok {
		return code
	}
	letters, err := deadletter.Read(ctx, store, deadletter.Filter{IDs: pos})
	if err != nil {
		return fail(env, exitFailure, err)
	}
	if len(letters) == 0 {
		return fail(env, exitFailure, usererr.New(nil, "no dead letter has id %q (relay deadletter list shows them)", pos[0]))
	}
	enc := json.NewEncoder(env.stdout)
	enc.SetIndent("", "  ")
	for _, l := range letters {
		out := letterJSON(l, true)
		hist, err := deadletter.History(ctx, store, &l.DeadLetter)
		if err != nil {
			return fail(env, exitFailure, err)
		}
		out["redrives"] = hist
		_ = enc.Encode(out)
	}
	return exitOK
}

// letterJSON is a dead letter as the CLI prints it; whole adds the
// payload, headers and raw row.
func letterJSON(l deadletter.Letter, whole bool) map[string]any {
	out := map[string]any{"id": l.ID, "topic": l.Topic, "key": l.Key, "type": l.Type, "schemaVersion": l.SchemaVersion,
		"source": l.Source, "sourceTable": l.SourceTable, "commitLsn": lsnText(l.CommitLSN), "seq": l.Seq, "xid": l.Xid,
		"commitTime": l.CommitTime, "occurredAt": l.OccurredAt, "reason": l.Reason, "state": l.State(), "currentReason": l.CurrentReason()}
	if l.Latest != nil {
		out["latestRun"] = l.Latest.RunID
	}
	if whole {
		out["payload"], out["headers"], out["rawRow"] = l.Payload, l.Headers, l.RawRow
	}
	return out
}

func cmdDeadletterRedrive(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "deadletter redrive", "--topic T [--type X] [--reason TEXT] [--id ID] [--since T --until T] [--dry-run] [--json]")
	var sf sourceFlags
	sf.register(fs, env)
	var ff filterFlags
	ff.register(fs)
	actor := fs.String("actor", "", "who runs it, for the run's record (default: the OS user)")
	dryRun := fs.Bool("dry-run", false, "judge the dead letters and say what would be published; write nothing")
	again := fs.Bool("again", false, "also take dead letters an earlier redrive put in their topics (they are found present)")
	asJSON := fs.Bool("json", false, "print the run and every dead letter's outcome as JSON")
	if code, ok := parseFlags(fs, args, sf.resolve); !ok {
		return code
	}
	f, err := ff.filter(time.Now())
	if err != nil {
		return fail(env, exitUsage, err)
	}
	if len(f.Topics)+len(f.IDs)+len(f.Types) == 0 && f.Reason == "" {
		return fail(env, exitUsage, usererr.New(nil, "relay deadletter redrive needs a selection: --topic, --type, --id or --reason (relay deadletter list shows the dead letters)"))
	}
	rt, code, ok := openRepublish(ctx, env, &sf)
	if !ok {
		return code
	}
	defer rt.close()
	res, err := deadletter.Redrive(ctx, rt.store, deadletter.Options{Filter: f, Mappings: rt.mappings, Contracts: rt.contracts,
		Protector: rt.protector, Again: *again, Actor: *actor, DryRun: *dryRun, Log: rt.log, Selection: ff.String()})
	if res != nil {
		printRun(env, res, *asJSON, *dryRun)
	}
	if err != nil {
		return fail(env, exitFailure, err)
	}
	return exitOK
}

// printRun prints a republish run: its record and the refusals, or all as
// JSON.
func printRun(env *cliEnv, res *republish.Result, asJSON, dryRun bool) {
	if asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(map[string]any{"run": res.Run, "outcomes": res.Outcomes, "dryRun": dryRun})
		return
	}
	r := res.Run
	if dryRun {
		admitted := 0
		for _, o := range res.Outcomes {
			if o.Status == republish.Admitted {
				admitted++
			}
		}
		fmt.Fprintf(env.stdout, "dry run (%s): %d events considered: %d would be published, %d already present, %d still fail\n",
			r.Kind, r.Events, admitted, r.Present, r.Refused)
	} else {
		fmt.Fprintf(env.stdout, "%s %s by %s: %d events considered: %d published, %d already present, %d still fail\n",
			r.Kind, r.ID, r.Actor, r.Events, r.Republished, r.Present, r.Refused)
	}
	for _, t := range r.Topics {
		if t.Republished > 0 {
			fmt.Fprintf(env.stdout, "  %s: %d published (table %s, versions %v)\n", t.Topic, t.Republished, t.Table, t.Versions)
		}
	}
	shown := 0
	for _, o := range res.Outcomes {
		if o.Status != republish.Refused {
			continue
		}
		if shown++; shown > 20 {
			fmt.Fprintf(env.stdout, "  ... %d more still fail (--json lists every one)\n", r.Refused-20)
			break
		}
		fmt.Fprintf(env.stdout, "  still fails: %s (topic %s): %s\n", o.ID, orDash(o.Topic), squeeze(o.Reason, 200))
	}
}

func cmdDeadletterRelease(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "deadletter release", "--topic T [--app-id A] [--disarm D] [--actor NAME]")
	storeURL := fs.String("store", "", "store URL: file:///path or s3://bucket/prefix (default from DELTABUS_STORE)")
	topicName := fs.String("topic", "", "the held topic (required)")
	appID := fs.String("app-id", "", "release only this relay's hold (default: every relay whose breaker holds the topic)")
	disarm := fs.Duration("disarm", 0, "keep the topic's breaker off this long after the release: its refused events go to _dead_letter meanwhile (0 = armed at once: fix the cause first)")
	actor := fs.String("actor", "", "who releases it (default: the OS user)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if err := outbox.ValidTopic(*topicName); err != nil {
		return fail(env, exitUsage, usererr.New(err, "--topic: %v", err))
	}
	if *disarm < 0 {
		return fail(env, exitUsage, usererr.New(nil, "--disarm %s is negative", *disarm))
	}
	store, code, ok := openStoreFlag(ctx, env, *storeURL)
	if !ok {
		return code
	}
	states, err := catalog.ListRebuildStates(ctx, store, *topicName)
	if err != nil {
		return fail(env, exitFailure, err)
	}
	who := *actor
	if who == "" {
		who = republish.OSUser()
	}
	released := 0
	for _, st := range states {
		if st.Paused != catalog.HoldDeadLetterRate || (*appID != "" && st.AppID != *appID) || st.AppID == "" {
			continue
		}
		rel := catalog.Release{Topic: *topicName, AppID: st.AppID, HeldAt: st.PausedAt, Actor: who}
		if *disarm > 0 {
			rel.DisarmFor = disarm.String()
		}
		if err := catalog.WriteRelease(ctx, store, rel); err != nil {
			return fail(env, exitFailure, err)
		}
		released++
		fmt.Fprintf(env.stdout, "released topic %s for relay %s (held at %s: %s); the relay resumes it within seconds and re-reads its events from the hold\n",
			*topicName, st.AppID, st.PausedAt, squeeze(st.Last, 200))
	}
	if released == 0 {
		return fail(env, exitFailure, usererr.New(nil, "topic %q is not held by a relay's circuit breaker (relay status lists every hold and why)", *topicName))
	}
	return exitOK
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// squeeze returns s on one line, cut to n bytes.
func squeeze(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func lsnText(v int64) string { return fmt.Sprintf("%X/%X", uint64(v)>>32, uint32(v)) }
