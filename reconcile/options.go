package reconcile

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/deltabus/deltabus/outbox"
)

// Defaults of Options.
const (
	DefaultWindow      = time.Hour
	DefaultLast        = 24 * time.Hour
	DefaultLateness    = 5 * time.Minute
	DefaultRetention   = 7 * 24 * time.Hour
	DefaultDurableWait = 30 * time.Second
	DefaultLeafRows    = 20_000
	DefaultMaxIDs      = 1_000
	DefaultSampleIDs   = 10
)

// Table names one outbox table of the source.
type Table struct {
	Schema, Name string
}

func (t Table) String() string { return t.Schema + "." + t.Name }

// Options configure one reconciliation run.
type Options struct {
	// From and To bound the checked range [From, To). When both are zero,
	// To is the current server time truncated to Window and From = To - Last.
	From, To time.Time
	Last     time.Duration
	Window   time.Duration
	// Topics restricts the check; empty = every topic registered in the
	// store or present in the source range.
	Topics []string
	// Slot is the relay's replication slot whose confirmed position is the
	// durable position; Publication lists the outbox tables unless Tables
	// names them.
	Slot        string
	Publication string
	// AppID is the relay's --app-id when it set one; empty: the source's
	// (catalog.ResolveAppID). Only that source's rows of the topics count.
	AppID    string
	Tables   []Table
	Mappings outbox.Mappings
	// Lateness is how long after occurred_at a row may still commit.
	Lateness time.Duration
	// Retention is the janitor's retention: rows older than T0 - Retention
	// may have been deleted from the source.
	Retention time.Duration
	// DurableWait bounds the wait for the slot to confirm W0.
	DurableWait time.Duration
	// LeafRows: bisection stops when source + log rows of a range are at
	// most this many, and the range is diffed id by id.
	LeafRows int64
	// VerifyIDs diffs every closed window id by id instead of by counts.
	VerifyIDs bool
	// MaxIDs caps the ids listed per kind and window (counts stay exact).
	MaxIDs int
	// Tracer traces the run and each window (trace.go); nil: no spans.
	Tracer trace.TracerProvider
}

// WithDefaults fills zero fields.
func (o Options) WithDefaults() Options {
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.Last <= 0 {
		o.Last = DefaultLast
	}
	if o.Lateness <= 0 {
		o.Lateness = DefaultLateness
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.DurableWait <= 0 {
		o.DurableWait = DefaultDurableWait
	}
	if o.LeafRows <= 0 {
		o.LeafRows = DefaultLeafRows
	}
	if o.MaxIDs <= 0 {
		o.MaxIDs = DefaultMaxIDs
	}
	if o.Slot == "" {
		o.Slot = "deltabus"
	}
	if o.Publication == "" {
		o.Publication = "deltabus"
	}
	return o
}

// Validate reports inconsistent options.
func (o Options) Validate() error {
	if o.From.IsZero() != o.To.IsZero() {
		return errors.New("give both --from and --to, or neither (then --last applies)")
	}
	if !o.From.IsZero() && !o.From.Before(o.To) {
		return fmt.Errorf("--from %s is not before --to %s", o.From.Format(time.RFC3339), o.To.Format(time.RFC3339))
	}
	if o.Lateness < 0 {
		return fmt.Errorf("--lateness %s is negative", o.Lateness)
	}
	if o.Window < time.Millisecond {
		return fmt.Errorf("--window %s is too small (at least 1ms)", o.Window)
	}
	for _, t := range o.Topics {
		if err := outbox.ValidTopic(t); err != nil {
			return fmt.Errorf("--topic: %w", err)
		}
	}
	return nil
}

// Window is the half-open time range [Start, End) of occurred_at.
type Window struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

func (w Window) String() string {
	return w.Start.UTC().Format(time.RFC3339Nano) + "/" + w.End.UTC().Format(time.RFC3339Nano)
}

// windows splits [from, to) into consecutive windows of size d (the last
// one may be shorter).
func windows(from, to time.Time, d time.Duration) []Window {
	var out []Window
	for s := from; s.Before(to); s = s.Add(d) {
		e := s.Add(d)
		if e.After(to) {
			e = to
		}
		out = append(out, Window{Start: s.UTC(), End: e.UTC()})
	}
	return out
}
