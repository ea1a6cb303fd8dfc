package relay

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink"
)

// Metrics are the relay's metrics (OpenTelemetry instruments, served on
// /metrics under their Prometheus names; package telemetry). A nil
// *Metrics records nothing. Per-row counts and positions are atomics read
// at collection time, so the receive loop pays an atomic add per row.
type Metrics struct {
	events, commits metric.Int64Counter // by topic
	lastCommit      metric.Float64Gauge // unix seconds of the last commit, by topic
	batchSeconds    metric.Float64Histogram
	stageSeconds    metric.Float64Histogram // a batch's time in each stage, by stage (batchStages)
	latency         metric.Float64Histogram // source commit -> Delta commit, per batch's last transaction
	breakerTrips    metric.Int64Counter     // by topic (breaker.go)

	deadLetters, skippedEvents, reconnects, watermarksIgnored, races, streamTimeouts, txRecords atomic.Int64
	durableLSN, receivedLSN                                                                     atomic.Uint64
	// heard is when a session last heard from the server (unix
	// nanoseconds; 0: never).
	heard atomic.Int64

	mu sync.Mutex
	// slot labels the stream's gauge: `relay status` finds its slot's.
	slot metric.MeasurementOption
	// paused is the pause watermark LSN of each topic waiting for its
	// rebuild (the slot is held there); absent when not paused.
	pausedAt map[string]uint64
	sourceID *catalog.Identity // the source the relay reads, once identified
	// states reports the size of the sink's open tables' state (nil: the
	// sink keeps none).
	states func() []sink.TableState
	// paceFiles is Config.StatePaceFiles: the state past which a table's
	// commits are paced (deltabus_table_state_pace_seconds).
	paceFiles int64
	// timeline is the source's timeline the relay's progress is on;
	// phantoms, by topic, the events the source's forks left published
	// from abandoned timelines (metrics_timeline.go).
	timeline atomic.Uint32
	phantoms map[string]int
}

// NewMetrics creates the relay's instruments from mp.
func NewMetrics(mp metric.MeterProvider) (*Metrics, error) {
	meter := mp.Meter("github.com/deltabus/deltabus/relay")
	m := &Metrics{pausedAt: map[string]uint64{}}
	var errs [22]error
	m.events, errs[0] = meter.Int64Counter("deltabus_events_committed_total", metric.WithDescription("Events committed to Delta topic tables."))
	m.commits, errs[1] = meter.Int64Counter("deltabus_delta_commits_total", metric.WithDescription("Delta commits, by topic."))
	m.lastCommit, errs[2] = meter.Float64Gauge("deltabus_last_commit_timestamp_seconds", metric.WithDescription("Unix time of the last Delta commit, by topic."), metric.WithUnit("s"))
	m.batchSeconds, errs[3] = meter.Float64Histogram("deltabus_batch_commit_seconds", metric.WithDescription("Time to commit one batch to every topic."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(exponentialBuckets(0.002, 2, 14)...))
	m.stageSeconds, errs[16] = meter.Float64Histogram("deltabus_batch_stage_seconds",
		metric.WithDescription("Time a batch spent in each stage of the commit pipeline: open (first row received to handed to the committer), files (data files written), queued (waiting for the previous batch's log entries), logs (log entries durable)."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(exponentialBuckets(0.0005, 2, 14)...))
	m.latency, errs[4] = meter.Float64Histogram("deltabus_end_to_end_seconds", metric.WithDescription("Source commit to Delta commit, for the last transaction of each batch."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(exponentialBuckets(0.005, 2, 14)...))
	counters := []struct {
		name, help string
		v          *atomic.Int64
	}{
		{"deltabus_dead_letters_total", "Outbox rows sent to the _dead_letter topic.", &m.deadLetters},
		{"deltabus_events_skipped_total", "Events re-sent by PostgreSQL after a restart and dropped because their topic already holds them.", &m.skippedEvents},
		{"deltabus_reconnects_total", "Replication sessions restarted after an error.", &m.reconnects},
		{"deltabus_watermarks_ignored_total", "Rebuild watermarks ignored: malformed, or without a matching intent in the store.", &m.watermarksIgnored},
		{"deltabus_commit_races_total", "Topic commits that lost their table version to another writer (another source's relay, compaction) that did not conflict, and were retried at the next version.", &m.races},
		{"deltabus_transaction_records_total", "Source transactions recorded in the _transactions table.", &m.txRecords},
		{"deltabus_stream_timeouts_total", "Replication sessions ended because the server sent nothing for the stream timeout, not even a requested reply.", &m.streamTimeouts},
	}
	for i, c := range counters {
		_, errs[5+i] = meter.Int64ObservableCounter(c.name, metric.WithDescription(c.help),
			metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
				o.Observe(c.v.Load())
				return nil
			}))
	}
	gauges := []struct {
		name, help string
		v          *atomic.Uint64
	}{
		{"deltabus_durable_lsn", "Highest LSN acknowledged to PostgreSQL (all events below it are in Delta).", &m.durableLSN},
		{"deltabus_received_lsn", "Highest LSN received from PostgreSQL.", &m.receivedLSN},
	}
	for i, g := range gauges {
		_, errs[11+i] = meter.Float64ObservableGauge(g.name, metric.WithDescription(g.help),
			metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
				o.Observe(float64(g.v.Load()))
				return nil
			}))
	}
	_, errs[15] = meter.Float64ObservableGauge("deltabus_stream_last_message_age_seconds",
		metric.WithDescription("Seconds since the replication stream last delivered a message (data or keepalive); grows while the connection is dead or being re-established."),
		metric.WithUnit("s"), metric.WithFloat64Callback(m.observeHeard))
	_, errs[13] = meter.Float64ObservableGauge("deltabus_rebuild_paused_since_lsn",
		metric.WithDescription("Position a held topic (waiting for its rebuild, or whose table is missing or incompatible) holds the slot at."),
		metric.WithFloat64Callback(m.observePaused))
	_, errs[14] = meter.Int64ObservableGauge("deltabus_source_info",
		metric.WithDescription("The source database the relay reads (1): its appId, cluster system identifier, database and slot."),
		metric.WithInt64Callback(m.observeSource))
	files, errF := meter.Int64ObservableGauge("deltabus_table_state_files",
		metric.WithDescription("Files each table the relay writes keeps in its in-memory state, by table and kind: active (until compaction replaces them; about 0.45 KB each, their statistics packed) and tombstone (removed files kept for the checkpoints until the file retention passes, 7 days by default; about 0.3 KB each). Both grow by one per commit of a busy topic."))
	pace, errP := meter.Float64ObservableGauge("deltabus_table_state_pace_seconds",
		metric.WithDescription("Shortest time between two commits of each table its state calls for: 0 while the table holds no more than --state-pace-files files, then one second per that many files beyond, at most 5 (events of a paced table wait up to that long). Any --topic-commit-interval or group interval applies as well."),
		metric.WithUnit("s"))
	errs[17] = errors.Join(errF, errP)
	if errs[17] == nil {
		// One reading of the tables' states serves both gauges.
		_, errs[18] = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			m.observeStates(o, files, pace)
			return nil
		}, files, pace)
	}
	errs[19], errs[20] = m.registerTimeline(meter)
	m.breakerTrips, errs[21] = meter.Int64Counter("deltabus_breaker_trips_total",
		metric.WithDescription("Times a topic's circuit breaker tripped: too many of its rows were refused in a window, so the topic is held instead of filling _dead_letter, until `relay deadletter release`."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return m, nil
}

// exponentialBuckets returns n bucket bounds from start, each factor times
// the previous (prometheus.ExponentialBuckets).
func exponentialBuckets(start, factor float64, n int) []float64 {
	b := make([]float64, n)
	for i := range b {
		b[i] = start
		start *= factor
	}
	return b
}

func topicAttr(topic string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("topic", topic)))
}

func (m *Metrics) observePaused(_ context.Context, o metric.Float64Observer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for topic, lsn := range m.pausedAt {
		o.Observe(float64(lsn), topicAttr(topic))
	}
	return nil
}

func (m *Metrics) observeSource(_ context.Context, o metric.Int64Observer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id := m.sourceID; id != nil {
		o.Observe(1, metric.WithAttributeSet(attribute.NewSet(attribute.String("app_id", id.AppID),
			attribute.String("system_id", id.Source.SystemID), attribute.String("database", id.Source.Database),
			attribute.String("slot", id.Source.Slot))))
	}
	return nil
}

func (m *Metrics) observeHeard(_ context.Context, o metric.Float64Observer) error {
	m.mu.Lock()
	slot := m.slot
	m.mu.Unlock()
	if t := m.heard.Load(); t != 0 && slot != nil {
		o.Observe(time.Since(time.Unix(0, t)).Seconds(), slot)
	}
	return nil
}

// source records the source the relay reads (deltabus_source_info).
func (m *Metrics) source(id catalog.Identity) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sourceID = &id
}

func (m *Metrics) lostRaces(n int) {
	if m != nil && n > 0 {
		m.races.Add(int64(n))
	}
}

// reportStates makes the sink's TableStates the source of
// deltabus_table_state_files and deltabus_table_state_pace_seconds (nil:
// none), paced past paceFiles.
func (m *Metrics) reportStates(f func() []sink.TableState, paceFiles int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.states, m.paceFiles = f, paceFiles
}

var (
	stateActive    = attribute.String("kind", "active")
	stateTombstone = attribute.String("kind", "tombstone")
)

// observeStates reports each open table's active files and tombstones,
// and the interval between commits its state calls for.
func (m *Metrics) observeStates(o metric.Observer, files metric.Int64Observable, pace metric.Float64Observable) {
	m.mu.Lock()
	f, threshold := m.states, m.paceFiles
	m.mu.Unlock()
	if f == nil {
		return
	}
	for _, t := range f() {
		table := attribute.String("table", t.Table)
		o.ObserveInt64(files, t.Files, metric.WithAttributeSet(attribute.NewSet(table, stateActive)))
		o.ObserveInt64(files, t.Tombstones, metric.WithAttributeSet(attribute.NewSet(table, stateTombstone)))
		var d time.Duration
		if threshold > 0 {
			d = statePaceInterval(t.Files+t.Tombstones, threshold)
		}
		o.ObserveFloat64(pace, d.Seconds(), metric.WithAttributeSet(attribute.NewSet(table)))
	}
}

// forSlot labels the stream's gauge with the relay's slot.
func (m *Metrics) forSlot(slot string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.slot = metric.WithAttributeSet(attribute.NewSet(attribute.String("slot", slot)))
}

func (m *Metrics) heardFrom(t time.Time) {
	if m != nil {
		m.heard.Store(t.UnixNano())
	}
}

func (m *Metrics) streamTimeout() {
	if m != nil {
		m.streamTimeouts.Add(1)
	}
}

func (m *Metrics) batchCommitted(b *batch, took time.Duration) {
	if m == nil {
		return
	}
	ctx := context.Background()
	m.batchSeconds.Record(ctx, took.Seconds())
	for _, st := range batchStages(b, time.Now()) {
		m.stageSeconds.Record(ctx, st.d.Seconds(), st.attr)
	}
	if !b.lastTime.IsZero() && b.events > 0 {
		m.latency.Record(ctx, time.Since(b.lastTime).Seconds())
	}
}

var (
	stageOpen   = metric.WithAttributes(attribute.String("stage", "open"))
	stageFiles  = metric.WithAttributes(attribute.String("stage", "files"))
	stageQueued = metric.WithAttributes(attribute.String("stage", "queued"))
	stageLogs   = metric.WithAttributes(attribute.String("stage", "logs"))
)

type stageTime struct {
	attr metric.RecordOption
	d    time.Duration
}

// batchStages splits a batch made durable at done into the pipeline's
// stages (the committer's doc): where a batch's latency went. A batch of
// carried rows only has no open stage.
func batchStages(b *batch, done time.Time) []stageTime {
	out := make([]stageTime, 0, 4)
	if !b.openedAt.IsZero() && !b.startedAt.Before(b.openedAt) {
		out = append(out, stageTime{stageOpen, b.startedAt.Sub(b.openedAt)})
	}
	return append(out, stageTime{stageFiles, b.filedAt.Sub(b.startedAt)},
		stageTime{stageQueued, b.loggingAt.Sub(b.filedAt)}, stageTime{stageLogs, done.Sub(b.loggingAt)})
}

func (m *Metrics) acknowledged(lsn uint64) {
	if m != nil {
		m.durableLSN.Store(lsn)
	}
}

func (m *Metrics) watermarkIgnored() {
	if m != nil {
		m.watermarksIgnored.Add(1)
	}
}

func (m *Metrics) topicCommitted(topic string, events int) {
	if m == nil {
		return
	}
	ctx, attr := context.Background(), topicAttr(topic)
	m.events.Add(ctx, int64(events), attr)
	m.commits.Add(ctx, 1, attr)
	m.lastCommit.Record(ctx, float64(time.Now().UnixNano())/1e9, attr)
}

func (m *Metrics) deadLetter() {
	if m != nil {
		m.deadLetters.Add(1)
	}
}

func (m *Metrics) transactionsRecorded(n int) {
	if m != nil {
		m.txRecords.Add(int64(n))
	}
}

func (m *Metrics) skipped() {
	if m != nil {
		m.skippedEvents.Add(1)
	}
}

func (m *Metrics) received(lsn uint64) {
	if m != nil {
		m.receivedLSN.Store(lsn)
	}
}

func (m *Metrics) reconnect() {
	if m != nil {
		m.reconnects.Add(1)
	}
}

func (m *Metrics) paused(topic string, since uint64, on bool) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if on {
		m.pausedAt[topic] = since
	} else {
		delete(m.pausedAt, topic)
	}
}
