package relay

import (
	"log/slog"
	"time"

	"github.com/deltabus/deltabus/sink"
)

// A Delta writer keeps every file of a table in memory: each active file
// until compaction, then its tombstone for the table's file retention
// (7 days by default), because every checkpoint must list both. Every
// commit adds a file, so a topic committed many times a second holds
// millions of them within days, and a relay that commits as fast as its
// disk allows outgrows any memory limit (docs/operations.md, "Busy
// topics").
//
// statePace bounds that growth. A table whose state holds more than
// threshold files (active files and tombstones: Config.StatePaceFiles)
// commits at most once per statePaceInterval of its size: one second more
// for every threshold files beyond the threshold, at most
// statePaceMaxInterval. Below the threshold nothing changes: group commit
// keeps a busy topic's latency at the commit's own for as long as its
// state takes to reach the threshold (minutes at a hundred commits a
// second, never for a topic committing less than once every
// retention/threshold). Above it, the state grows ever more slowly while
// expiring tombstones shrink it, so under any sustained load it settles
// where the two meet: about sqrt(threshold x retention) files, 137,000 at
// the default 25,000 and 7 days, some 45 MB per busy table.
type statePace struct {
	threshold int64
	read      func() []sink.TableState
	readAt    time.Time
	paced     map[string]time.Duration // tables over the threshold, and their interval
	log       *slog.Logger
}

// statePaceMaxInterval caps the interval: a table this far over the
// threshold (an old table loaded with a long retention's tombstones)
// still commits every few seconds, well inside Config.ReadyStall.
const statePaceMaxInterval = 5 * time.Second

// statePaceEvery is how often the tables' sizes are read again.
const statePaceEvery = time.Second

// newStatePace returns the pacing for s's tables, nil when the sink does
// not report its state or threshold is not positive.
func newStatePace(threshold int64, s sink.Sink, log *slog.Logger) *statePace {
	rep, ok := s.(sink.StateReporter)
	if threshold <= 0 || !ok {
		return nil
	}
	return &statePace{threshold: threshold, read: rep.TableStates, paced: map[string]time.Duration{}, log: log}
}

// statePaceInterval is the interval of a table holding files files.
func statePaceInterval(files, threshold int64) time.Duration {
	if files <= threshold {
		return 0
	}
	d := time.Duration(float64(files-threshold) / float64(threshold) * float64(time.Second))
	return min(max(d, time.Millisecond), statePaceMaxInterval)
}

// refresh reads the tables' sizes again when the last reading is older
// than statePaceEvery, and logs each table that starts or stops being
// paced.
func (sp *statePace) refresh(now time.Time) {
	if sp == nil || now.Sub(sp.readAt) < statePaceEvery {
		return
	}
	sp.readAt = now
	seen := make(map[string]bool, len(sp.paced))
	for _, st := range sp.read() {
		files := st.Files + st.Tombstones
		iv := statePaceInterval(files, sp.threshold)
		if iv == 0 {
			continue
		}
		seen[st.Table] = true
		if _, was := sp.paced[st.Table]; !was {
			sp.log.Warn("table state large: its commits are paced to bound the relay's memory",
				"table", st.Table, "files", st.Files, "tombstones", st.Tombstones,
				"threshold", sp.threshold, "interval", iv.Round(time.Millisecond))
		}
		sp.paced[st.Table] = iv
	}
	for table := range sp.paced {
		if !seen[table] {
			sp.log.Info("table state back under the threshold: its commits are no longer paced", "table", table)
			delete(sp.paced, table)
		}
	}
}

// interval returns the table's current interval, 0 when it is not paced.
func (sp *statePace) interval(table string) time.Duration {
	if sp == nil {
		return 0
	}
	return sp.paced[table]
}
