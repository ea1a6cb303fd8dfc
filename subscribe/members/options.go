package members

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/deltabus/deltabus/pii"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
)

// Defaults of Options and limits of a ReceiveRequest.
const (
	DefaultPollInterval  = 100 * time.Millisecond
	DefaultSyncInterval  = 200 * time.Millisecond
	DefaultMaxBuffered   = 100_000
	DefaultMaxBufferedMB = 128
	DefaultDedup         = 100_000
	DefaultSnapshotEvery = 1000
	DefaultIdleClose     = 5 * time.Minute

	DefaultMax        = 10
	MaxMax            = 1000
	MaxWait           = 60 * time.Second
	DefaultVisibility = 30 * time.Second
	MinVisibility     = 100 * time.Millisecond
	MaxVisibility     = 12 * time.Hour
	MaxRetryAfter     = 12 * time.Hour
	MaxMemberName     = 128
	MaxAckIDs         = 10_000
)

// Options configure Groups. The zero value is usable.
type Options struct {
	Logger *slog.Logger
	// PollInterval is the wait between two looks at the topic's log once
	// the group read everything (default 100 ms on local disk, 1 s on S3,
	// where each look is a LIST request).
	PollInterval time.Duration
	// SyncInterval is the wait between two looks at the group's own log
	// for entries other servers wrote, while other servers are seen
	// writing (default 200 ms on local disk, 1 s on S3; every ten times
	// that otherwise).
	SyncInterval time.Duration
	// MaxBuffered bounds the events a group holds from its Low on, acked
	// or not (default 100,000): past it the group reads no further until
	// its oldest events are acknowledged. It bounds memory, and how far a
	// stalled key lets the others run ahead.
	MaxBuffered int
	// MaxBufferedBytes bounds the same events by their size (default
	// 128 MiB, about: strings plus a fixed cost per event); a group holds
	// at least one event whatever its size.
	MaxBufferedBytes int64
	// Dedup is how many event ids each group remembers to drop
	// duplicates by (source, event_id) (default 100,000; negative: off).
	Dedup int
	// SnapshotEvery is the number of entries between two snapshots of a
	// group's state (default 1000; one at least every 30 s with changes).
	SnapshotEvery int
	// IdleClose closes a group no member asked anything of for this long
	// (default 5 minutes); it opens again on the next request.
	IdleClose time.Duration
	// Reveal decrypts personal fields for requests that ask for it
	// (ReceiveRequest.Reveal; subscribe.RevealEvents). Nil: such requests
	// are refused.
	Reveal *pii.Revealer
	// Upcasts finds the steps that convert an event type's payload from
	// one version to the next, for members that declare the version they
	// read (ReceiveRequest.Want). Nil: only events at the version asked
	// for, or newer with PassNewer, are handed to such a member.
	Upcasts Upcasts
	// Server names this process in the entries it writes (default host,
	// pid and a random suffix).
	Server string
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

// Upcasts returns the step that converts typ's payload in topic from
// version from to from+1; ok is false when there is none.
type Upcasts interface {
	Step(topic, typ string, from int32) (f subscribe.Upcaster, ok bool)
}

func (o Options) withDefaults(root storage.Store) Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s3 := storage.IsS3(root.String())
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
		if s3 {
			o.PollInterval = time.Second
		}
	}
	if o.SyncInterval <= 0 {
		o.SyncInterval = DefaultSyncInterval
		if s3 {
			o.SyncInterval = time.Second
		}
	}
	if o.MaxBuffered <= 0 {
		o.MaxBuffered = DefaultMaxBuffered
	}
	if o.MaxBufferedBytes <= 0 {
		o.MaxBufferedBytes = DefaultMaxBufferedMB << 20
	}
	if o.Dedup == 0 {
		o.Dedup = DefaultDedup
	}
	if o.SnapshotEvery <= 0 {
		o.SnapshotEvery = DefaultSnapshotEvery
	}
	if o.IdleClose <= 0 {
		o.IdleClose = DefaultIdleClose
	}
	if o.Server == "" {
		host, _ := os.Hostname()
		o.Server = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8])
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// ReceiveRequest is what a member asks for.
type ReceiveRequest struct {
	Member string // the member's name: 1-128 printable characters
	// Max is the most events handed over (default 10, at most 1000).
	Max int
	// Wait is how long to wait for an event when none is ready (at most
	// one minute; 0 answers at once).
	Wait time.Duration
	// Visibility is the lease: an event not acknowledged within it is
	// handed out again (default 30 s, 100 ms to 12 h).
	Visibility time.Duration
	// Want names the version the member reads per event type: older
	// events are converted (Options.Upcasts), newer ones are left for
	// another member unless PassNewer.
	Want      map[string]int32
	PassNewer bool
	// Reveal decrypts personal fields (Options.Reveal). The server sets it
	// for callers allowed to.
	Reveal bool
}

// RequestError is a request that cannot be served as asked: its message
// is one line that says what to change.
type RequestError struct{ Msg string }

func (e *RequestError) Error() string { return e.Msg }

func badRequest(format string, args ...any) error {
	return &RequestError{Msg: fmt.Sprintf(format, args...)}
}

// ErrNoTable is wrapped by the error of a reset of a topic that has no
// table yet.
var ErrNoTable = errors.New("the topic has no table yet")

func (r *ReceiveRequest) check() error {
	switch {
	case r.Member == "" || len(r.Member) > MaxMemberName:
		return badRequest("member must name the member: 1 to %d characters", MaxMemberName)
	case r.Max < 0 || r.Max > MaxMax:
		return badRequest("max is %d: give 1 to %d events", r.Max, MaxMax)
	case r.Wait < 0 || r.Wait > MaxWait:
		return badRequest("wait_ms is %d: give 0 to %d", r.Wait.Milliseconds(), MaxWait.Milliseconds())
	case r.Visibility != 0 && (r.Visibility < MinVisibility || r.Visibility > MaxVisibility):
		return badRequest("visibility_ms is %d: give %d to %d", r.Visibility.Milliseconds(), MinVisibility.Milliseconds(), MaxVisibility.Milliseconds())
	}
	for _, c := range r.Member {
		if c < 0x20 || c == 0x7f {
			return badRequest("member %q holds a control character", r.Member)
		}
	}
	for typ, v := range r.Want {
		if v < 1 {
			return badRequest("want_version of type %q is %d: versions start at 1", typ, v)
		}
	}
	if r.Max == 0 {
		r.Max = DefaultMax
	}
	if r.Visibility == 0 {
		r.Visibility = DefaultVisibility
	}
	return nil
}

// Message is an event handed to a member: acknowledge it by AckID.
type Message struct {
	AckID    string
	Delivery int32 // deliveries of this event to the group, this one included
	Event    subscribe.Event
}

// AckResult says which ack ids took effect. An id that did not is listed
// in Failed with the reason: its lease ran out and the event was handed
// out again, or the group was reset since.
type AckResult struct {
	Done   int
	Failed []Failed
}

// Failed is an ack id that did not take effect.
type Failed struct {
	AckID  string `json:"ack_id"`
	Reason string `json:"reason"`
}
