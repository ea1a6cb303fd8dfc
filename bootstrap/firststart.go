package bootstrap

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/contract"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pii"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// Config names the relay a bootstrap or rebuild works for.
type Config struct {
	Source      string // PostgreSQL DSN
	Slot        string // replication slot (default "deltabus")
	Publication string // publication (default "deltabus")
	// AppID is the relay's txn appId; empty takes the source's (Identify,
	// catalog.ResolveAppID), which is what every command should do.
	AppID string
	// NoFailoverSlot creates the slot without FAILOVER on PostgreSQL 17
	// and later, where it is otherwise a failover slot (relay
	// --failover-slot=false).
	NoFailoverSlot bool
}

func (c Config) withDefaults() Config {
	if c.Slot == "" {
		c.Slot = "deltabus"
	}
	if c.Publication == "" {
		c.Publication = "deltabus"
	}
	return c
}

// Options tune a snapshot. The zero value is usable.
type Options struct {
	Log *slog.Logger
	// Mappings gives each outbox table's column layout (the zero value is
	// the DeltaBus layout everywhere), as the relay's.
	Mappings outbox.Mappings
	// Connections is how many connections read the snapshot in parallel
	// (default 1). With one, each table is read by one sequential scan,
	// PostgreSQL's cheapest read (it recycles a small ring of buffers);
	// with more, tables are split into block ranges read by TID range
	// scans, which go through shared buffers and cost the server more per
	// row once the table outgrows them.
	Connections int
	// Workers is how many goroutines encode the rows of each connection
	// into Parquet (default 2): encoding costs more CPU than reading.
	Workers int
	// Files bounds the data files and the memory of each topic writer.
	Files topic.FileOptions
	// ProgressEvery is the period of the progress log line (default 5s).
	ProgressEvery time.Duration
	// Metrics, if set, receives the deltabus_bootstrap_* metrics.
	Metrics metric.MeterProvider
	// Tracer, if set, traces the phases of a bootstrap or rebuild
	// (trace.go).
	Tracer trace.TracerProvider
	// Protector, if set, encrypts the personal fields of every event
	// copied and redacts dead letters of such topics, as the relay's does
	// (package pii); an event whose key cannot be had fails the copy.
	Protector *pii.Protector
	// Contracts, if set, judges every event copied as the relay's stream
	// does (contract.Cache.Judge): a refused event goes to _dead_letter
	// with the violation as its reason, or, in a topic that holds on
	// violations, fails the copy with nothing written (contracts.go).
	Contracts *contract.Cache
}

func (o Options) withDefaults() Options {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Connections <= 0 {
		o.Connections = 1
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 5 * time.Second
	}
	// Smaller row groups than the streaming defaults: every worker has a
	// writer open per topic.
	if o.Files.RowGroupRows == 0 {
		o.Files.RowGroupRows = 16 << 10
	}
	if o.Files.RowGroupBytes == 0 {
		o.Files.RowGroupBytes = 8 << 20
	}
	if o.Files.MemoryBuffer == 0 {
		o.Files.MemoryBuffer = 128 << 10
	}
	return o
}

// FirstStart returns the relay's first-start hook (relay.Relay.FirstStart):
// it (re)creates the slot with an exported snapshot, copies the rows the
// snapshot sees into the topics (skipping events they already hold),
// commits each topic once, writes the relay marker and returns the
// consistent point to stream from.
func FirstStart(cfg Config, store storage.Store, opts Options) func(ctx context.Context, id catalog.Identity) (pglogrepl.LSN, error) {
	return func(ctx context.Context, id catalog.Identity) (pglogrepl.LSN, error) {
		cfg := cfg
		cfg.AppID = id.AppID
		res, err := Snapshot(ctx, cfg, store, opts)
		if err != nil {
			return 0, err
		}
		return res.ConsistentPoint, nil
	}
}

// TopicResult is what a snapshot did to one topic.
type TopicResult struct {
	Added   int64 // events (or dead letters) committed
	Skipped int64 // already in the topic, not written again
	Version int64 // Delta version of the snapshot commit, -1 when nothing was committed
	// Table is the folder, under the store root, of the table holding the
	// topic: its own name, or its group's table (catalog.GroupTable).
	Table string
}

// Result describes a finished snapshot.
type Result struct {
	ConsistentPoint pglogrepl.LSN // the stream starts here
	Rows            int64         // outbox rows the snapshot saw
	Topics          map[string]TopicResult
	DroppedSlot     bool // an existing slot was dropped first
	Took            time.Duration
}
