package republish

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"slices"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/contract"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pii"
	"github.com/deltabus/deltabus/sink"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/deltasink"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// Kinds of runs.
const (
	KindRedrive = "redrive" // dead letters published into their topics (package deadletter)
	KindRepair  = "repair"  // events reconcile found missing, from their outbox rows (package reconcile)
)

// Event is one event to publish, as it goes to its topic: its Source,
// CommitLSN, Seq, Xid and CommitTime are what the topic's row keeps.
type Event struct {
	outbox.Event
	// Refused, when set, is why the caller already knows the event cannot
	// be published (a dead letter that is no event, a row its mapping
	// still refuses): it is recorded as refused, not judged.
	Refused string
}

// Status is what became of one event.
type Status string

// Statuses of an Outcome.
const (
	Republished Status = "republished" // committed by this run
	Present     Status = "present"     // its topic held it already (the stream, an earlier run)
	Refused     Status = "refused"     // it still fails: Reason says why
	Admitted    Status = "admitted"    // a dry run would publish it
)

// Outcome is what became of one event of a run.
type Outcome struct {
	ID        string `json:"id"`
	Topic     string `json:"topic"`
	Source    string `json:"source"`
	CommitLSN int64  `json:"commitLsn"`
	Seq       int32  `json:"seq"`
	Status    Status `json:"status"`
	Reason    string `json:"reason,omitempty"`
	Table     string `json:"table,omitempty"`
	Version   int64  `json:"version"` // the table version that holds it (Republished), else -1
}

// Options configure a run.
type Options struct {
	Root      storage.Store
	Contracts *contract.Cache // nil: no contract is checked
	Protector *pii.Protector  // nil: no personal data is protected
	Log       *slog.Logger
	// Kind, Actor and Selection go to the run's record: what the run is,
	// who asked (default: the OS user), what for.
	Kind, Actor, Selection string
	// DryRun judges the events and looks them up in their topics, and
	// writes nothing (no commit, no record).
	DryRun bool
	Files  topic.FileOptions
	Now    func() time.Time
}

// Result is a run's record and the outcome of each event, in the order
// they were given.
type Result struct {
	Run      catalog.RepublishRun
	Outcomes []Outcome
}

// maxAttempts bounds how often a (topic, source) is judged against its
// table again after another writer won the race with some of its events.
const maxAttempts = 8

// Publish publishes events into their topics exactly once (see the
// package doc), records the run (catalog.RepublishRun and one _republished
// row per event) and returns what became of each event. Events of one
// (topic, source) are committed together, in the order given. An error
// means the run could not go on: what it committed stands, its record
// says it failed, and running it again publishes the rest.
func Publish(ctx context.Context, opts Options, events []Event) (*Result, error) {
	opts = opts.withDefaults()
	now := opts.Now().UTC()
	host, _ := os.Hostname()
	res := &Result{Run: catalog.RepublishRun{ID: catalog.NewRunID(now), Kind: opts.Kind, Actor: opts.Actor, Host: host,
		Selection: opts.Selection, Started: now, State: "running", Events: len(events)}}
	if !opts.DryRun {
		if err := catalog.WriteRepublishRun(ctx, opts.Root, res.Run); err != nil {
			return nil, err
		}
	}
	err := publish(ctx, opts, events, res)
	res.Run.Finished, res.Run.State = opts.Now().UTC(), "done"
	if err != nil {
		res.Run.State, res.Run.Error = "failed", err.Error()
	}
	res.summarize()
	if opts.DryRun {
		return res, err
	}
	if len(res.Outcomes) > 0 {
		if rerr := recordOutcomes(ctx, opts.Root, res); rerr != nil {
			err = errors.Join(err, rerr)
			res.Run.State, res.Run.Error = "failed", err.Error()
		}
	}
	if werr := catalog.WriteRepublishRun(context.WithoutCancel(ctx), opts.Root, res.Run); werr != nil {
		err = errors.Join(err, werr)
	}
	return res, err
}

func (o Options) withDefaults() Options {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Actor == "" {
		o.Actor = OSUser()
	}
	return o
}

// groupKey is one commit's worth of events: a topic and a source.
type groupKey struct{ topic, source string }

func publish(ctx context.Context, opts Options, events []Event, res *Result) error {
	res.Outcomes = make([]Outcome, len(events))
	j := &judge{root: opts.Root, contracts: opts.Contracts, protector: opts.Protector, tables: map[groupKey]string{}}
	groups := map[groupKey][]int{}
	var order []groupKey
	for i := range events {
		ev := &events[i]
		res.Outcomes[i] = Outcome{ID: ev.ID, Topic: ev.Topic, Source: ev.Source, CommitLSN: ev.CommitLSN, Seq: ev.Seq, Version: -1}
		why := ev.Refused
		if why == "" {
			var err error
			if why, err = j.refusal(ctx, &ev.Event); err != nil {
				return err
			}
		}
		if why != "" {
			res.Outcomes[i].Status, res.Outcomes[i].Reason = Refused, why
			continue
		}
		k := groupKey{ev.Topic, ev.Source}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	if len(order) == 0 {
		return nil
	}
	if !opts.DryRun {
		holder := catalog.LeaseName("deltabus-republish", res.Run.ID)
		topics := make([]string, 0, len(order))
		for _, k := range order {
			topics = append(topics, k.topic)
		}
		slices.Sort(topics)
		lease, err := catalog.HoldLease(ctx, opts.Root, holder, slices.Compact(topics), func() time.Time { return res.Run.Started }, opts.Log)
		if err != nil {
			return err
		}
		defer lease.Release(context.WithoutCancel(ctx), opts.Root, holder)
	}
	for _, k := range order {
		if err := publishGroup(ctx, opts, res, k, events, groups[k]); err != nil {
			return err
		}
	}
	return nil
}

// publishGroup publishes the events idx of one topic and source: it
// reads which of them the topic's table holds, writes the others into
// data files, in order, and commits them as one append whose txn moves
// the source's republish counter by one. When another run moved the
// counter first, or a commit that won a version holds one of the events,
// nothing is committed and the events are judged against the table again.
func publishGroup(ctx context.Context, opts Options, res *Result, k groupKey, events []Event, idx []int) error {
	evs := make([]Event, len(idx))
	for i, x := range idx {
		evs[i] = events[x]
	}
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		done, err := publishOnce(ctx, opts, res, k, evs, idx)
		if done || err != nil {
			return err
		}
		opts.Log.Info("another writer committed to the topic meanwhile; judging the events against its table again",
			"topic", k.topic, "source", k.source, "attempt", attempt)
	}
	return fmt.Errorf("topic %q: gave up after %d attempts that other writers' commits overtook", k.topic, maxAttempts)
}

// publishOnce is one attempt of publishGroup; done=false asks for another.
func publishOnce(ctx context.Context, opts Options, res *Result, k groupKey, evs []Event, idx []int) (done bool, err error) {
	why, err := tableRefusal(ctx, opts.Root, k.source, k.topic) // as the source's relay sees it now
	if err != nil {
		return false, err
	}
	if why != "" {
		for _, x := range idx {
			res.Outcomes[x].Status, res.Outcomes[x].Reason = Refused, why
		}
		return true, nil
	}
	s := deltasink.New(opts.Root, deltasink.Options{AppID: catalog.RepublishAppID(k.source), Logger: opts.Log, SyncCheckpoints: true})
	defer s.Close(context.WithoutCancel(ctx))
	t, err := s.Open(ctx, k.topic) // the table, and the source's republish counter in it
	if err != nil {
		return false, err
	}
	st := storage.Sub(opts.Root, t.Table)
	set := newIDSet(k.topic, k.source, t.Table != k.topic, evs)
	found, err := set.present(ctx, st)
	if err != nil {
		return false, err
	}
	var write []int // positions in evs
	seen := map[string]bool{}
	for i, ev := range evs {
		o := &res.Outcomes[idx[i]]
		o.Table = t.Table
		if found[ev.ID] || seen[ev.ID] {
			o.Status = Present
			continue
		}
		seen[ev.ID] = true
		write = append(write, i)
	}
	if len(write) == 0 {
		return true, nil
	}
	if opts.DryRun {
		for _, i := range write {
			res.Outcomes[idx[i]].Status = Admitted
		}
		return true, nil
	}
	set = newIDSet(k.topic, k.source, t.Table != k.topic, pick(evs, write))
	w := topic.NewFileWriter(st, opts.Files) // each row keeps its event's source
	for _, i := range write {
		if err := w.Append(&evs[i].Event); err != nil {
			w.Abort()
			return false, fmt.Errorf("write events of topic %q: %w", k.topic, err)
		}
	}
	adds, err := w.Close(ctx)
	if err != nil {
		return false, fmt.Errorf("write events of topic %q: %w", k.topic, err)
	}
	params := map[string]string{"mode": "Append", "partitionBy": "[]", "deltabusRun": res.Run.ID, "deltabusKind": res.Run.Kind}
	v, err := s.Republish(ctx, k.topic, adds, max(t.Position+1, 1), params, set.guard(ctx, st))
	if errors.Is(err, sink.ErrFenced) || errors.Is(err, errConflict) {
		deleteFiles(ctx, st, adds) // refused before its put: no log entry names them
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("publish %d events into topic %q: %w", len(write), k.topic, err)
	}
	for _, i := range write {
		o := &res.Outcomes[idx[i]]
		o.Status, o.Version = Republished, v
	}
	opts.Log.Info("events published into their topic", "run", res.Run.ID, "kind", res.Run.Kind, "topic", k.topic,
		"table", t.Table, "source", k.source, "events", len(write), "version", v)
	return true, nil
}

func pick(evs []Event, at []int) []Event {
	out := make([]Event, len(at))
	for i, x := range at {
		out[i] = evs[x]
	}
	return out
}

// deleteFiles removes data files no commit references (best effort:
// VACUUM takes what is left).
func deleteFiles(ctx context.Context, st storage.Store, adds []delta.Add) {
	for _, a := range adds {
		_ = st.Delete(context.WithoutCancel(ctx), a.Path)
	}
}

// openTopic opens the topic's table as the relay of source sees it: its
// status, its position.
func openTopic(ctx context.Context, root storage.Store, source, name string) (sink.Topic, error) {
	// Not closed: Close would write the claims Open read, which are the
	// relay's to write.
	s := deltasink.New(root, deltasink.Options{AppID: source, SyncCheckpoints: true})
	return s.Open(ctx, name)
}

// summarize counts the outcomes into the run's record.
func (r *Result) summarize() {
	run := &r.Run
	run.Republished, run.Present, run.Refused, run.Topics, run.Reasons = 0, 0, 0, nil, nil
	byTopic := map[string]*catalog.RepublishedTo{}
	var topics []string
	for _, o := range r.Outcomes {
		t := byTopic[o.Topic]
		if t == nil {
			t = &catalog.RepublishedTo{Topic: o.Topic, Table: o.Table}
			byTopic[o.Topic] = t
			topics = append(topics, o.Topic)
		}
		if t.Table == "" {
			t.Table = o.Table
		}
		switch o.Status {
		case Republished:
			run.Republished++
			t.Republished++
			if !slices.Contains(t.Versions, o.Version) {
				t.Versions = append(t.Versions, o.Version)
			}
		case Present:
			run.Present++
			t.Present++
		case Refused:
			run.Refused++
			t.Refused++
			if run.Reasons == nil {
				run.Reasons = map[string]int{}
			}
			if _, ok := run.Reasons[o.Reason]; ok || len(run.Reasons) < 20 {
				run.Reasons[o.Reason]++
			}
		}
	}
	slices.Sort(topics)
	for _, name := range topics {
		run.Topics = append(run.Topics, *byTopic[name])
	}
}

// OSUser is the name of the user running the process, for a run's actor.
func OSUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	for _, k := range []string{"USER", "LOGNAME", "USERNAME"} {
		if u := os.Getenv(k); u != "" {
			return u
		}
	}
	return fmt.Sprintf("uid %d", os.Getuid())
}
