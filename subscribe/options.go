package subscribe

import (
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/deltabus/deltabus/pii"
)

// Defaults of Options.
const (
	DefaultPollInterval = 250 * time.Millisecond
	DefaultBatchSize    = 1000
	DefaultMaxFileBytes = 512 << 20
)

// Options tune a subscription. The zero value is usable.
type Options struct {
	// Checkpoints keeps the group's position. Nil: StoreCheckpoints in the
	// same store as the topics.
	Checkpoints Checkpoints
	// PollInterval is the wait between two looks at the log once caught
	// up (default 250 ms). An idle poll lists _delta_log after the
	// position: one small list request.
	PollInterval time.Duration
	// BatchSize is the most events a Handler call receives (default 1000).
	// A batch may span versions; every batch ends with a checkpoint.
	BatchSize int
	// Start is where a group without a checkpoint starts (default: version
	// 0, every event the log holds).
	Start Start
	// Follow keeps polling once caught up; without it Subscribe returns nil
	// when it has delivered everything the log held when it looked.
	Follow bool
	// Dedup > 0 drops an event whose event_id is among the last Dedup
	// event ids this subscription delivered (see the package doc).
	Dedup int
	// Columns hands each batch to the handler by column (Batch.Columns)
	// instead of as Events, which stay empty: no Event is built per event,
	// which saves most of the subscription's own work for a handler that
	// reads a few fields of many events. Same events, order, positions,
	// checkpoints and guarantees; a batch may hold fewer than BatchSize
	// events when it spans many small files.
	Columns bool
	// MaxFileBytes refuses data files larger than this (default 512 MiB):
	// a data file is read whole, one at a time.
	MaxFileBytes int64
	// Logger receives progress and warnings; nil: slog.Default().
	Logger *slog.Logger
	// Upcasters, when set, converts older events of the types it knows to
	// the version the handler asks for before each batch is handled (see
	// Upcasters). It needs Events: it cannot be combined with Columns.
	Upcasters *Upcasters
	// Reveal, when set, decrypts the personal fields of every event
	// before the handler sees it (package pii: the consumer needs the KEK
	// and SELECT on the key table): an erased subject's fields come back
	// as null, listed in Event.Erased. The subscription follows the
	// store's _erasures records and drops erased subjects' cached keys at
	// once (else the key cache's TTL bounds it). Only the fields the
	// contract each event was written with marks are decrypted; a field
	// whose envelope does not open comes back as null, listed in
	// Event.Unreadable, and the event is delivered. Not with Columns, which
	// hands over the stored columns: envelopes stay envelopes there.
	Reveal *pii.Revealer
	// Tracer traces each handler call (see handle in trace.go); nil: the
	// global provider (otel.GetTracerProvider), a no-op unless the
	// program installed one.
	Tracer trace.TracerProvider
}

func (o Options) withDefaults() Options {
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = DefaultMaxFileBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Start names where a group starts (or is reset to): a version, the first
// version committed at or after a time, or after the latest version. The
// zero Start is version 0.
type Start struct {
	version int64
	at      time.Time
	latest  bool
}

// FromVersion starts at version v (its first event).
func FromVersion(v int64) Start { return Start{version: v} }

// FromTime starts at the first version whose commit timestamp is at or
// after t.
func FromTime(t time.Time) Start { return Start{at: t} }

// FromLatest starts after the newest version: only events committed from
// now on.
func FromLatest() Start { return Start{latest: true} }

// Version returns the version a FromVersion start names; ok is false for
// the other starts.
func (s Start) Version() (v int64, ok bool) {
	return s.version, !s.latest && s.at.IsZero()
}

// Time returns the time a FromTime start names; ok is false for the
// other starts.
func (s Start) Time() (t time.Time, ok bool) { return s.at, !s.at.IsZero() }

func (s Start) String() string {
	switch {
	case s.latest:
		return "latest"
	case !s.at.IsZero():
		return "time " + s.at.UTC().Format(time.RFC3339Nano)
	}
	return "version " + itoa(s.version)
}
