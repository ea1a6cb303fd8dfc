// Package daemon assembles a runnable relay from its configuration: the
// store, the Delta topic tables (deltasink), the first-start bootstrap and
// the metrics, and serves the health and metrics endpoints. The CLI, the
// demo and the end-to-end tests build their relays here, so they run what
// users run.
//
// With a status token (HTTPOptions.Token), the operator's page,
// /api/status and /debug/pprof/ answer only requests that carry it
// (bearer, or basic authentication's password), compared in constant
// time, and never log it; /healthz and /readyz always answer, and
// /metrics does unless HTTPOptions.MetricsToken (auth.go says why).
package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/deltabus/deltabus/bootstrap"
	"github.com/deltabus/deltabus/contract"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pii"
	"github.com/deltabus/deltabus/relay"
	"github.com/deltabus/deltabus/sink"
	"github.com/deltabus/deltabus/sink/deltasink"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/usererr"
)

// Options are what a relay needs besides its relay.Config.
type Options struct {
	Log      *slog.Logger    // nil = slog.Default()
	Mappings outbox.Mappings // outbox column layouts (zero = DeltaBus layout)
	// Meter, if set, creates the relay's and the bootstrap's metrics
	// (package telemetry builds it).
	Meter metric.MeterProvider
	// Tracer, if set, creates the relay's and the bootstrap's spans; nil
	// traces nothing.
	Tracer trace.TracerProvider
	S3     storage.S3Options
	// Store, if set, is used instead of opening cfg.Store (which must
	// still name it, for messages).
	Store storage.Store
	// Contracts tunes the relay's view of the event contracts registered
	// in the store (package contract); its Logger and Metrics are set here.
	Contracts contract.Options
	// PII encrypts the personal fields the store's contracts mark (or, when
	// it names a schema directory, its schemas), in the stream and in the
	// first-start bootstrap (package pii); with a KEK the relay follows
	// the _erasures records. Its Registry is set here.
	PII pii.Config
}

// New opens the store cfg names and returns a relay over it, ready to Run.
// The first session's connections are dialled meanwhile (relay.DialAhead):
// opening the store and reading its contracts overlap the database's
// connection start-ups instead of preceding them.
func New(ctx context.Context, cfg relay.Config, opts Options) (_ *relay.Relay, _ storage.Store, err error) {
	cfg = cfg.WithDefaults()
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if err := cfg.Validate(); err != nil {
		return nil, nil, usererr.New(err, "%s", err)
	}
	ahead := relay.DialAhead(ctx, cfg.Source)
	defer func() {
		if err != nil {
			ahead.Discard()
		}
	}()
	if opts.S3.Logger == nil {
		opts.S3.Logger = opts.Log
	}
	store := opts.Store
	if store == nil {
		var err error
		if store, err = OpenStore(ctx, cfg.Store, opts.S3); err != nil {
			return nil, nil, err
		}
	}
	var m *relay.Metrics
	co := opts.Contracts
	co.Logger = opts.Log
	if opts.Meter != nil {
		var err error
		if m, err = relay.NewMetrics(opts.Meter); err != nil {
			return nil, nil, fmt.Errorf("relay metrics: %w", err)
		}
		if co.Metrics, err = contract.NewMetrics(opts.Meter, "relay"); err != nil {
			return nil, nil, fmt.Errorf("contract metrics: %w", err)
		}
	}
	if opts.PII.Source == "" {
		opts.PII.Source = cfg.Source
	}
	contracts := contract.New(store, co)
	opts.PII.Registry = contracts // one cache validates and classifies
	priv, err := pii.OpenProtector(ctx, opts.PII)
	if err != nil {
		return nil, nil, err
	}
	sinkFor := func(appID string) sink.Sink {
		return deltasink.New(store, deltasink.Options{AppID: appID, Logger: opts.Log,
			ReadAhead: storage.IsS3(cfg.Store)})
	}
	r := relay.New(cfg, store, sinkFor, opts.Mappings, opts.Log, m)
	r.Tracer = opts.Tracer
	r.Contracts = contracts
	bo := bootstrap.Options{Log: opts.Log, Mappings: opts.Mappings, Metrics: opts.Meter, Tracer: opts.Tracer, Contracts: contracts}
	if priv != nil {
		r.Protector, bo.Protector = priv.Protector, priv.Protector
		pii.WatchErasures(ctx, store, priv.Keys, ErasurePoll, opts.Log)
		switch {
		case opts.PII.SchemasDir != "":
			opts.Log.Info("personal data: fields the schemas mark are encrypted", "schemas", opts.PII.SchemasDir, "keys", priv.Keys != nil)
		case priv.Keys != nil:
			opts.Log.Info("personal data: fields the registered contracts mark are encrypted")
		}
	}
	if priv != nil && priv.Unread != nil && ctx.Err() == nil {
		opts.Log.Warn("personal data: the contracts could not be read at start; each event is classified as it comes, and events a contract marks as personal wait for DELTABUS_KEK",
			"store", store.String(), "err", priv.Unread)
	}
	r.FirstStart = bootstrap.FirstStart(BootstrapConfig(cfg), store, bo)
	r.FollowTimeline = bootstrap.TimelineHook(BootstrapConfig(cfg), store, bo)
	r.Ahead = ahead
	return r, store, nil
}

// ErasurePoll is how often a relay with personal data reads the _erasures
// records to drop the erased subjects' cached keys.
const ErasurePoll = 5 * time.Second

// BootstrapConfig is the part of a relay's configuration a bootstrap or a
// rebuild needs.
func BootstrapConfig(cfg relay.Config) bootstrap.Config {
	cfg = cfg.WithDefaults()
	return bootstrap.Config{Source: cfg.Source, Slot: cfg.Slot, Publication: cfg.Publication, AppID: cfg.AppID, NoFailoverSlot: cfg.NoFailoverSlot}
}

// OpenStore checks a store URL and opens it.
func OpenStore(ctx context.Context, raw string, opts storage.S3Options) (storage.Store, error) {
	if err := storage.CheckURL(raw); err != nil {
		return nil, usererr.New(err, "%s", err)
	}
	st, err := storage.Open(ctx, raw, opts)
	if err != nil {
		return nil, usererr.New(err, "open store: %v", err)
	}
	return st, nil
}

// Run builds a relay for cfg and runs it until ctx ends (see relay.Run).
func Run(ctx context.Context, cfg relay.Config, opts Options) error {
	r, _, err := New(ctx, cfg, opts)
	if err != nil {
		return err
	}
	if err := r.Run(ctx); err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	return nil
}
