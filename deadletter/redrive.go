package deadletter

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/deltabus/deltabus/contract"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pii"
	"github.com/deltabus/deltabus/republish"
	"github.com/deltabus/deltabus/storage"
)

// Options configure a redrive.
type Options struct {
	Filter
	// Mappings are the outbox column mappings the relay reads its tables
	// with now: a dead letter the router made of a row is routed again
	// with them.
	Mappings  outbox.Mappings
	Contracts *contract.Cache
	Protector *pii.Protector
	// Again also takes dead letters an earlier redrive already put in
	// their topics (they are found present: nothing is written twice).
	Again  bool
	Actor  string
	DryRun bool
	Log    *slog.Logger
	// Selection describes the filter for the run's record.
	Selection string
}

// Redrive publishes the chosen dead letters into their topics once the
// registry or the mapping admits them, each as the event its row makes
// now, keeping its event id, source, commit LSN, seq, xid and commit time,
// in each source's commit order (package republish: exactly once, checked
// as the stream checks events). Dead letters an earlier redrive already
// put in their topics are left out unless opts.Again. Those that still
// fail stay where they are; the run's _republished rows give their new
// reasons.
func Redrive(ctx context.Context, root storage.Store, opts Options) (*republish.Result, error) {
	letters, err := Read(ctx, root, opts.Filter)
	if err != nil {
		return nil, err
	}
	rr := outbox.NewRowRouter(opts.Mappings)
	events := make([]republish.Event, 0, len(letters))
	for _, l := range letters {
		if l.Redriven() && !opts.Again {
			continue
		}
		events = append(events, candidate(rr, &l.DeadLetter))
	}
	return republish.Publish(ctx, republish.Options{Root: root, Contracts: opts.Contracts, Protector: opts.Protector, Log: opts.Log,
		Kind: republish.KindRedrive, Actor: opts.Actor, Selection: opts.Selection, DryRun: opts.DryRun}, events)
}

// candidate is the event a dead letter's row makes now, or the dead letter
// refused with why it cannot be one.
func candidate(rr *outbox.RowRouter, dl *outbox.DeadLetter) republish.Event {
	ev := republish.Event{Event: dl.Event}
	ev.Event.Source = dl.Source
	var form struct {
		SchemaVersion json.RawMessage `json:"schema_version"`
		Redacted      bool            `json:"redacted"`
	}
	_ = json.Unmarshal([]byte(dl.RawRow), &form)
	switch {
	case strings.HasPrefix(dl.Reason, outbox.ReasonUpdate):
		ev.Refused = "an UPDATE of an outbox row is not an event (outbox rows are immutable): nothing to redrive"
	case form.Redacted:
		ev.Refused = "its personal fields were redacted when it was dead-lettered: the dead letter no longer holds the event, so it is never published from here (its row stays in the outbox until the janitor's retention; the producer can write the event again)"
	case isNumber(form.SchemaVersion):
		// The event was routed and then refused (its contract, its topic's
		// table): the dead letter holds it whole.
	default:
		ev = routed(rr, dl)
	}
	return ev
}

// routed routes a dead letter the router made of a row again, with the
// mappings of now.
func routed(rr *outbox.RowRouter, dl *outbox.DeadLetter) republish.Event {
	cols, err := outbox.ParseRawRow(dl.RawRow)
	if err != nil {
		return republish.Event{Event: dl.Event, Refused: fmt.Sprintf("its raw row cannot be read: %v", err)}
	}
	txn := outbox.RowTxn{CommitLSN: dl.CommitLSN, Seq: dl.Seq, Xid: dl.Xid, CommitTime: dl.CommitTime}
	ev, again := rr.Route(dl.SourceTable, cols, txn)
	if again != nil {
		out := republish.Event{Event: dl.Event, Refused: again.Reason}
		out.Event.Source = dl.Source
		return out
	}
	ev.Source = dl.Source
	return republish.Event{Event: *ev}
}

func isNumber(raw json.RawMessage) bool {
	var n json.Number
	return len(raw) > 0 && raw[0] != '"' && json.Unmarshal(raw, &n) == nil
}
