package relay

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/pgsource"
	"github.com/deltabus/deltabus/storage"
)

// Config is everything `relay run` needs. Zero values take the defaults of
// DefaultConfig; Validate reports every problem, one line each.
type Config struct {
	Source      string // PostgreSQL DSN (DELTABUS_SOURCE)
	Store       string // file:///path or s3://bucket/prefix (DELTABUS_STORE)
	Slot        string // replication slot name
	Publication string // publication name
	// AppID overrides the Delta txn appId; empty (the default) takes the
	// source's: "deltabus-<system identifier>-<slot>", or the legacy
	// "deltabus-<slot>" of an earlier release's relay on this source
	// (catalog.ResolveAppID).
	AppID string

	BatchMaxEvents int   // close a batch after this many events
	BatchMaxBytes  int64 // ... or this many payload bytes
	// BatchMaxDelay, when positive, holds a batch until its oldest event
	// is this old (fewer, larger commits, as Kafka's linger.ms). 0, the
	// default: group commit, a batch closes as soon as the committer is
	// free to take it, so an event waits only for the commit in progress.
	BatchMaxDelay time.Duration
	// TopicCommitInterval is the shortest time between two commits of one
	// topic: a topic's events that arrive sooner wait and are committed
	// together (each commit costs two PUTs on S3). A topic quiet for an
	// interval commits at once. 0 takes the store's default
	// (DefaultS3CommitInterval on S3, none on local disk); negative: none.
	TopicCommitInterval time.Duration
	// StatePaceFiles is the state, in files (active ones and tombstones),
	// past which a table's commits are paced so that the relay's memory
	// stays bounded under sustained load (pace_state.go). 0 takes
	// DefaultStatePaceFiles; negative: never paced for its state.
	StatePaceFiles int64
	// CommitOverlap writes the next batch's data files while the previous
	// batch's log entries are made durable (two batches in flight). Off,
	// the default: a batch's files and log entries are written one stage
	// after the other and the next batch waits, which was faster on local
	// disk and on versitygw, where the two stages' writes queue for one
	// device (the committer's doc).
	CommitOverlap bool
	// TableParallelism is how many of a batch's tables each stage writes
	// at once. 0 takes the store's default: DefaultS3TableParallelism on
	// S3, where each table's put is a round trip the others need not wait
	// for; DefaultLocalTableParallelism on local disk, whose flushes
	// serialise in the file system whatever runs at once.
	TableParallelism int
	// TransactionRecords records each source transaction that published
	// events in the store's _transactions table (package txlog), after its
	// events, and publishes the source's resolved position
	// (catalog.Resolved) at most every ResolvedInterval (0: each second).
	TransactionRecords bool
	ResolvedInterval   time.Duration
	// RecordsInterval is the shortest time between two commits of the
	// transaction records (txrecords.go): the records of the batches
	// committed meanwhile wait, and so does their acknowledgement. 0
	// takes DefaultRecordsInterval; negative: a records commit per batch.
	RecordsInterval time.Duration
	StatusInterval  time.Duration // standby status update period
	// StreamTimeout is how long the replication stream may stay silent,
	// a reply having been asked for, before the session is declared dead
	// and a new one starts (liveness.go). 0 derives it from the server's
	// wal_sender_timeout: max(wal_sender_timeout, 10 s), 60 s when the
	// server's is disabled.
	StreamTimeout time.Duration
	// ShutdownTimeout bounds a graceful stop: how long it waits for the
	// source transaction being received to end and for the last commit.
	// Past it every blocking call is cancelled and Run returns.
	ShutdownTimeout time.Duration
	// ReadyStall: the relay reports not ready when events are pending and
	// no commit has succeeded for this long (default max(10 s, 200 ×
	// BatchMaxDelay)).
	ReadyStall time.Duration

	Standby bool // wait for the slot to be free instead of failing
	// NoFailoverSlot keeps the slot without FAILOVER on PostgreSQL 17 and
	// later. By default the relay creates its slot as a failover slot and
	// makes an existing one so before it streams: standbys with
	// sync_replication_slots keep a copy, and after a promotion the relay
	// resumes from it, with no recovery and no phantom when the primary
	// lists them in synchronized_standby_slots (relay doctor checks).
	NoFailoverSlot bool
	// Heartbeat is how often the relay writes a tiny non-transactional
	// logical message into its own database (0 = default 1 min, negative =
	// never), so its slot advances even when that database writes nothing
	// while others in the cluster do.
	Heartbeat time.Duration
	// Breaker is each topic's circuit breaker: past its rate of refused
	// rows the topic holds instead of filling _dead_letter (breaker.go).
	Breaker Breaker
	// StopAt, when set, stops the relay gracefully once it has received
	// everything the source wrote before this WAL position: what it
	// received is committed and acknowledged (at or past StopAt), and Run
	// returns nil. Like pg_recvlogical's --endpos: a drain up to a known
	// point, before a planned switch-over or to time a backlog.
	StopAt pglogrepl.LSN
}

// DefaultConfig returns the defaults, tuned for sub-second end-to-end
// latency at thousands of events per second.
func DefaultConfig() Config {
	return Config{
		Slot:           "deltabus",
		Publication:    "deltabus",
		BatchMaxEvents: 50_000,
		// Half the Delta sink's memory budget (16 MiB of pending rows
		// and in-memory files, deltasink.Options.PendingBudget): a
		// batch's rows take more than their payload bytes (ids, keys,
		// buffer growth), and a batch past the budget pays for staging
		// rows and writing files early. At 64 MiB a drain of ~600-byte
		// payloads (two encrypted fields) spent about a tenth more relay CPU
		// per event (docs/benchmarks.md, "Personal data").
		BatchMaxBytes: 8 << 20,
		// No BatchMaxDelay: group commit. A 30 ms delay gave p50 25 ms
		// and p99 68 ms at 2,000 tx/s on local disk, where a commit takes
		// a few milliseconds (docs/benchmarks.md).
		StatusInterval:  time.Second,
		ShutdownTimeout: 30 * time.Second,
	}
}

// DefaultS3CommitInterval is TopicCommitInterval's default on S3: a topic
// commits at most once a second (about 5.2M PUTs, $26 a month at $0.005
// per 1,000, however busy), and one quiet for a second commits at once.
const DefaultS3CommitInterval = time.Second

// DefaultLocalTableParallelism and DefaultS3TableParallelism are
// TableParallelism's defaults. On S3 a batch's tables (five in the latency
// benchmark) go out at once instead of four and then the fifth, a whole
// round trip later; the bound keeps a batch of thousands of topics from
// encoding and sending that many files at once.
const (
	DefaultLocalTableParallelism = 4
	DefaultS3TableParallelism    = 16
	maxTableParallelism          = 256
)

// DefaultStatePaceFiles is StatePaceFiles' default: about 15 MB of state
// (active files, their statistics packed: some 0.6 KB each in the heap
// with the checkpointer's second map) before a table is paced, reached
// after about four minutes of a hundred commits a second; under sustained
// load its state then settles near 137,000 files, mostly tombstones
// (pace_state.go).
const DefaultStatePaceFiles = 25_000

var slotName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// WithDefaults fills zero fields from DefaultConfig.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	set := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	set(&c.Slot, d.Slot)
	set(&c.Publication, d.Publication)
	if c.BatchMaxEvents == 0 {
		c.BatchMaxEvents = d.BatchMaxEvents
	}
	if c.BatchMaxBytes == 0 {
		c.BatchMaxBytes = d.BatchMaxBytes
	}
	if c.StatusInterval == 0 {
		c.StatusInterval = d.StatusInterval
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = d.ShutdownTimeout
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = time.Minute
	}
	if c.TopicCommitInterval == 0 {
		c.TopicCommitInterval = -1
		if storage.IsS3(c.Store) {
			c.TopicCommitInterval = DefaultS3CommitInterval
		}
	}
	if c.StatePaceFiles == 0 {
		c.StatePaceFiles = DefaultStatePaceFiles
	}
	if c.TableParallelism == 0 {
		c.TableParallelism = DefaultLocalTableParallelism
		if storage.IsS3(c.Store) {
			c.TableParallelism = DefaultS3TableParallelism
		}
	}
	if c.ReadyStall == 0 {
		c.ReadyStall = max(10*time.Second, 200*c.BatchMaxDelay, 10*c.TopicCommitInterval)
	}
	return c
}

// Validate checks the configuration without touching the network. The
// returned error joins one line per problem, each saying how to fix it.
func (c Config) Validate() error {
	var errs []error
	if c.Source == "" {
		errs = append(errs, errors.New("no source database: set DELTABUS_SOURCE or --source to a PostgreSQL DSN (postgres://user@host:5432/db)"))
	} else if _, err := pgsource.ParseConfig(c.Source); err != nil {
		errs = append(errs, err)
	}
	if err := storage.CheckURL(c.Store); err != nil {
		errs = append(errs, err)
	}
	if !slotName.MatchString(c.Slot) {
		errs = append(errs, fmt.Errorf("slot name %q is invalid: use 1-63 characters of a-z, 0-9 and _", c.Slot))
	}
	if c.AppID != "" {
		if err := catalog.CheckName("relay", c.AppID); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Publication == "" {
		errs = append(errs, errors.New("publication name is empty: set --publication (default deltabus)"))
	}
	if c.StreamTimeout < 0 {
		errs = append(errs, fmt.Errorf("--stream-timeout %s is negative: give a positive duration, or 0 to derive it from the server's wal_sender_timeout", c.StreamTimeout))
	}
	if c.BatchMaxEvents < 1 || c.BatchMaxBytes < 1 {
		errs = append(errs, errors.New("batch limits must be positive (--batch-max-events, --batch-max-bytes)"))
	}
	if c.TableParallelism < 0 || c.TableParallelism > maxTableParallelism {
		errs = append(errs, fmt.Errorf("--table-parallelism %d is out of range: give 1-%d, or 0 for the store's default", c.TableParallelism, maxTableParallelism))
	}
	if c.BatchMaxDelay < 0 {
		errs = append(errs, errors.New("--batch-max-delay must not be negative (0, the default, commits a batch as soon as the committer is free)"))
	}
	if err := c.Breaker.validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
