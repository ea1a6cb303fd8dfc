package catalog

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/deltabus/deltabus/storage"
)

// Fork records that a source's relay found the source on a new timeline
// whose history left the relay's timeline at ForkLSN: the promotion of a
// standby (or a point-in-time recovery). Events of the source that the
// topics hold with a commit LSN at or after the fork were published from
// the old timeline and are not in the new one: the source lost them with
// its old primary. They stay in the topics (the log is append-only) and
// are named here: phantoms. The record is written before any transaction
// of the new timeline is committed, so every event it names is from the
// old one.
type Fork struct {
	AppID        string    `json:"appId"`
	Source       Source    `json:"source"`
	FromTimeline uint32    `json:"fromTimeline"`
	ToTimeline   uint32    `json:"toTimeline"`
	ForkLSN      string    `json:"forkLsn"`
	DetectedAt   time.Time `json:"detectedAt"`
	// Highest is the highest position the topics held for the source when
	// the fork was found; Epoch, if the fork began one, the new epoch.
	Highest int64  `json:"highest"`
	Epoch   *Epoch `json:"epoch,omitempty"`
	// Phantoms are the events published past the fork, by topic;
	// PhantomTransactions the transaction records (package txlog) of the
	// source past the fork: records of transactions the new timeline
	// never had.
	Phantoms            map[string]Phantoms `json:"phantoms,omitempty"`
	PhantomTransactions []PhantomTx         `json:"phantomTransactions,omitempty"`
}

// PhantomTx names a transaction record published from an abandoned
// timeline.
type PhantomTx struct {
	Xid       int64 `json:"xid"`
	CommitLSN int64 `json:"commitLsn"`
}

// Phantoms are one topic's events published from an abandoned timeline.
type Phantoms struct {
	// Table is the table that holds them (the topic's, or its group's);
	// Version the table's version when the fork was found: every phantom
	// is at or below it.
	Table   string `json:"table"`
	Version int64  `json:"version"`
	// IDs are the events' ids, in the table's order.
	IDs []string `json:"ids"`
	// FirstLSN and LastLSN bound their commit LSNs.
	FirstLSN string `json:"firstLsn"`
	LastLSN  string `json:"lastLsn"`
}

// Count returns the number of phantoms of every topic.
func (f Fork) Count() int {
	n := 0
	for _, p := range f.Phantoms {
		n += len(p.IDs)
	}
	return n
}

// Topics returns the topics with phantoms, sorted.
func (f Fork) Topics() []string {
	out := make([]string, 0, len(f.Phantoms))
	for t := range f.Phantoms {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// WriteFork writes (or replaces) the record of a fork.
func WriteFork(ctx context.Context, store storage.Store, f Fork) error {
	if err := writeJSON(ctx, store, f, KindFork, f.AppID, strconv.FormatUint(uint64(f.ToTimeline), 10)); err != nil {
		return fmt.Errorf("write fork record: %w", err)
	}
	return nil
}

// ListForks returns every fork recorded in the store, of every source, by
// appId and then timeline.
func ListForks(ctx context.Context, store storage.Store) ([]Fork, error) {
	objs, err := store.List(ctx, Prefix+"forks/", "")
	if err != nil {
		return nil, fmt.Errorf("list fork records in %s: %w", store, err)
	}
	var out []Fork
	for _, o := range objs {
		kind, names, ok := Parse(o.Key)
		if !ok || kind != KindFork {
			continue
		}
		var f Fork
		found, err := readJSON(ctx, store, &f, KindFork, names...)
		if err != nil {
			return nil, err
		}
		if found {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b Fork) int {
		if a.AppID != b.AppID {
			if a.AppID < b.AppID {
				return -1
			}
			return 1
		}
		return int(a.ToTimeline) - int(b.ToTimeline)
	})
	return out, nil
}
