package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"time"

	"github.com/deltabus/deltabus/verify"
)

// Results are a run's figures in machine-readable form (`relay bench
// --json FILE`): what the lines print, plus each round's ratios and the
// latency distribution. bench/charts draws them. Field names are
// camelCase, like every JSON the CLI writes; durations are milliseconds,
// CPU per event microseconds, memory MiB.
type Results struct {
	Started time.Time `json:"started"`
	// Machine is what the figures were measured on (cores, kernel).
	Machine string        `json:"machine,omitempty"`
	Drains  []DrainResult `json:"drains,omitempty"`
	BigTx   *BigTxResult  `json:"bigTx,omitempty"`
	// TopicsShape is issue 30's many-topic memory shape (bench/shape.go).
	TopicsShape *BigTxResult    `json:"topicsShape,omitempty"`
	Latency     []LatencyResult `json:"latency,omitempty"`
	Fanin       []FaninResult   `json:"fanin,omitempty"`
	Memory      []MemoryResult  `json:"memory,omitempty"`
}

// FaninResult is one count of sources of the fan-in run: the relays
// sharing one store (five shared topics) against the same relays each
// into a store of its own, and against one source alone, in one run.
type FaninResult struct {
	Name    string `json:"name"` // fanin_2, fanin_s3_4, ...
	Store   string `json:"store"`
	Sources int    `json:"sources"`
	Topics  int    `json:"topics"`
	// Events is each source's backlog in the drain (single-row tx).
	Events               int     `json:"events"`
	SharedEventsPerSec   float64 `json:"sharedEventsPerSec"`
	SeparateEventsPerSec float64 `json:"separateEventsPerSec"`
	// Ratio is the median of the rounds' shared over separate events/s.
	Ratio  float64   `json:"ratio"`
	Rounds []float64 `json:"rounds"`
	// Races and commits of the relays sharing the store, summed over
	// sources, in the drain and in the steady load.
	DrainRaces    int `json:"drainRaces"`
	DrainCommits  int `json:"drainCommits"`
	SteadyRaces   int `json:"steadyRaces"`
	SteadyCommits int `json:"steadyCommits"`
	// The steady load: Rate tx/s per source for Seconds.
	Rate         int     `json:"rate"`
	Seconds      float64 `json:"seconds"`
	SharedEvents int     `json:"sharedEvents"`
	// p99 latency per source (ms): sharing one store, each into its own
	// store under the same load, and one source alone.
	SharedP99   []float64 `json:"sharedP99Ms"`
	SeparateP99 []float64 `json:"separateP99Ms"`
	SingleP99   float64   `json:"singleP99Ms"`
}

// MemoryResult is one shape of the memory run: the peak RSS (VmHWM) of
// the `relay run` process that drained it.
type MemoryResult struct {
	Name         string  `json:"name"` // memory_one_tx, memory_topics_10000_s3, ...
	Store        string  `json:"store"`
	Rows         int     `json:"rows"`
	Transactions int     `json:"transactions"`
	Seconds      float64 `json:"seconds"`
	PeakRSS      float64 `json:"peakRssMiB"`
}

// DrainResult is one drain kind (a shape, unloaded or beside a CPU hog):
// the relay against pg_recvlogical on the same WAL, medians of the rounds.
type DrainResult struct {
	Name   string `json:"name"` // drain_1000row_tx, drain_single_row_tx_loaded, ...
	Events int    `json:"events"`
	Loaded bool   `json:"loaded"`
	Relay  Drain  `json:"relay"`
	Ref    Drain  `json:"pgRecvlogical"`
	// Ratio is the median of the rounds' throughput ratios (relay over
	// pg_recvlogical: above 1 the relay is faster).
	Ratio  float64   `json:"ratio"`
	Rounds []float64 `json:"rounds"`
	// Controls are pg_recvlogical against itself in each round: how far
	// a ratio moves by chance in this run.
	Controls []float64 `json:"controls,omitempty"`
	// Contracts is the relay with a contract on every event, Personal
	// the relay encrypting two personal fields of every event (also
	// under a contract), in the same rounds; Ratio is theirs over
	// pg_recvlogical, like the drain's.
	Contracts *SideDrain `json:"contracts,omitempty"`
	Personal  *SideDrain `json:"personal,omitempty"`
	// PersonalOverContracts is the personal relay's CPU per event over
	// the contracts-only relay's (issue 28's bound: at most 1.3).
	PersonalOverContracts float64 `json:"personalOverContractsCpu,omitempty"`
	// Sides are the relays timed beside the measured one in the same
	// rounds (sides.go), by name: "records_off" (without transaction
	// records), "other_build" (Options.OtherBin).
	Sides map[string]*SideDrain `json:"sides,omitempty"`
}

// SideDrain is a variant of the relay in a drain's rounds: its figures
// and its throughput ratio to pg_recvlogical (median of the rounds').
type SideDrain struct {
	Drain
	Ratio float64 `json:"ratio"`
}

func side(events int, d drained, ratio float64) SideDrain {
	return SideDrain{Drain: Drain{EventsPerSec: float64(events) / d.secs, CPUPerEvent: d.cpu / float64(events) * 1e6,
		CPUWithWalsender: (d.cpu + d.server) / float64(events) * 1e6, PeakRSS: d.rss}, Ratio: ratio}
}

func ptr[T any](v T) *T { return &v }

// Drain is what one side of a drain cost, medians of the rounds.
type Drain struct {
	EventsPerSec float64 `json:"eventsPerSec"`
	CPUPerEvent  float64 `json:"cpuPerEventUs"`
	// CPUWithWalsender adds the CPU of the walsender that served it.
	CPUWithWalsender float64 `json:"cpuPerEventWithWalsenderUs"`
	PeakRSS          float64 `json:"peakRssMiB,omitempty"`
}

// BigTxResult is the one large transaction of the memory run.
type BigTxResult struct {
	Rows       int     `json:"rows"`
	RowsPerSec float64 `json:"rowsPerSec"`
	PeakRSS    float64 `json:"peakRssMiB"`
}

// LatencyResult is a steady-load latency run: source commit to Delta
// commit, per event.
type LatencyResult struct {
	Name        string             `json:"name"` // latency, or latency_<name> from --name
	Store       string             `json:"store"`
	Rate        int                `json:"rate"`
	Achieved    float64            `json:"achievedRate"`
	Seconds     float64            `json:"seconds"`
	Events      int                `json:"events"`
	Percentiles map[string]float64 `json:"percentilesMs"` // "50", "90", "99", "99.9", "100"
	Histogram   Histogram          `json:"histogram"`
	// Disk is the local disk's floor, measured right after the run.
	Disk *DiskFloor `json:"disk,omitempty"`
	// Stages is where the relay's batches spent their time.
	Stages []StageTime `json:"stages,omitempty"`
	// Delivery is pg_recvlogical's latency on the same load, in turn.
	Delivery *DeliveryFloor `json:"delivery,omitempty"`
}

// Histogram counts values in buckets of equal width from 0; the last
// bucket holds everything at or above its start.
type Histogram struct {
	BucketMs float64 `json:"bucketMs"`
	Counts   []int   `json:"counts"`
}

// latencyResult summarises a latency run's per-event latencies.
func latencyResult(name, store string, rate int, achieved float64, d time.Duration, lat []time.Duration) LatencyResult {
	r := LatencyResult{Name: name, Store: store, Rate: rate, Achieved: achieved, Seconds: d.Seconds(), Events: len(lat),
		Percentiles: map[string]float64{}}
	for _, p := range []float64{50, 90, 99, 99.9, 100} {
		r.Percentiles[fmt.Sprint(p)] = ms(verify.Percentile(lat, p))
	}
	r.Histogram = histogram(lat, 80)
	return r
}

// histogram puts lat into about n buckets of a round width covering up to
// the 99.9th percentile; the last bucket takes the rest.
func histogram(lat []time.Duration, n int) Histogram {
	if len(lat) == 0 {
		return Histogram{}
	}
	top := ms(verify.Percentile(lat, 99.9))
	width := roundStep(max(top, 1) / float64(n))
	counts := make([]int, int(math.Ceil(top/width))+1)
	for _, l := range lat {
		i := min(int(ms(l)/width), len(counts)-1)
		counts[max(i, 0)]++
	}
	return Histogram{BucketMs: width, Counts: counts}
}

// roundStep rounds v up to 1, 2 or 5 times a power of ten.
func roundStep(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// WriteFile writes r as indented JSON to path.
func (r *Results) WriteFile(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadResults reads a file WriteFile wrote.
func ReadResults(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// drainResult builds a drain kind's result from its rounds.
func drainResult(name string, events int, loaded bool, rel, ref drained, ratios, controls []float64) DrainResult {
	per := func(s float64) float64 { return s / float64(events) * 1e6 }
	side := func(d drained) Drain {
		return Drain{EventsPerSec: float64(events) / d.secs, CPUPerEvent: per(d.cpu), CPUWithWalsender: per(d.cpu + d.server), PeakRSS: d.rss}
	}
	return DrainResult{Name: name, Events: events, Loaded: loaded, Relay: side(rel), Ref: side(ref), Ratio: Median(ratios),
		Rounds: slices.Clone(ratios), Controls: slices.Clone(controls)}
}
