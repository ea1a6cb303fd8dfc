package republish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// errConflict: a commit that won a version from ours holds one of the
// events ours adds; the events are judged against the table again.
var errConflict = errors.New("another writer committed some of these events meanwhile")

// idSet is the events of one (topic, source) a run looks for in the
// topic's table, by event id, with the occurred_at range that bounds
// which data files may hold them.
type idSet struct {
	topic, source string
	shared        bool // the table is a group's: rows of other topics too
	ids           map[string]bool
	from, to      time.Time // occurred_at bounds of ids
}

func newIDSet(topicName, source string, shared bool, events []Event) *idSet {
	s := &idSet{topic: topicName, source: source, shared: shared, ids: make(map[string]bool, len(events))}
	for i, ev := range events {
		s.ids[ev.ID] = true
		if i == 0 || ev.OccurredAt.Before(s.from) {
			s.from = ev.OccurredAt
		}
		if i == 0 || ev.OccurredAt.After(s.to) {
			s.to = ev.OccurredAt
		}
	}
	return s
}

// mine reports whether a stored row is one of the set's events: the same
// topic, id and source (a row without a source, written before rows kept
// one, is the source's when its appId is of the legacy layout).
func (s *idSet) mine(e topic.EventRef) bool {
	if !s.ids[e.ID] || (s.shared && e.Topic != s.topic) {
		return false
	}
	return e.Source == s.source || (e.Source == "" && catalog.LegacyLayout(s.source))
}

// mayHold reports whether a data file may hold one of the set's events,
// by its statistics: the topic (in a group's table), the source and the
// occurred_at bounds. Files without statistics may hold anything.
func (s *idSet) mayHold(stats string) bool {
	if stats == "" {
		return true
	}
	if s.shared && !topic.MayHold(stats, s.topic) {
		return false
	}
	var st struct {
		Min struct {
			Source     *string `json:"source"`
			OccurredAt *string `json:"occurred_at"`
		} `json:"minValues"`
		Max struct {
			Source     *string `json:"source"`
			OccurredAt *string `json:"occurred_at"`
		} `json:"maxValues"`
		NullCount map[string]int64 `json:"nullCount"`
	}
	if json.Unmarshal([]byte(stats), &st) != nil {
		return true
	}
	if lo, hi := st.Min.Source, st.Max.Source; lo != nil && hi != nil && st.NullCount["source"] == 0 && (s.source < *lo || s.source > *hi) {
		return false
	}
	// Timestamp bounds are milliseconds, the minimum rounded down and the
	// maximum up: they enclose the microsecond values.
	if lo, err := parseStatTime(st.Min.OccurredAt); err == nil && lo.After(s.to) {
		return false
	}
	if hi, err := parseStatTime(st.Max.OccurredAt); err == nil && hi.Before(s.from) {
		return false
	}
	return true
}

func parseStatTime(p *string) (time.Time, error) {
	if p == nil {
		return time.Time{}, errors.New("no bound")
	}
	return time.Parse(time.RFC3339Nano, *p)
}

// present reads the table's latest snapshot and returns which of the
// set's events it already holds, reading only the files that may.
func (s *idSet) present(ctx context.Context, st storage.Store) (map[string]bool, error) {
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if errors.Is(err, delta.ErrNoTable) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", st, err)
	}
	found := map[string]bool{}
	for _, add := range snap.Files {
		if err := s.read(ctx, st, add, func(id string) bool { found[id] = true; return true }); err != nil {
			return nil, err
		}
	}
	return found, nil
}

// read calls fn with the id of every event of the set the data file holds,
// until fn returns false; files that cannot hold one are not read.
func (s *idSet) read(ctx context.Context, st storage.Store, add delta.Add, fn func(id string) bool) error {
	if !s.mayHold(add.Stats) {
		return nil
	}
	stop := errors.New("stop")
	err := topic.ReadEventIDs(ctx, st, add, func(e topic.EventRef) error {
		if s.mine(e) && !fn(e.ID) {
			return stop
		}
		return nil
	})
	if err != nil && !errors.Is(err, stop) {
		return fmt.Errorf("read event ids of %s/%s: %w", st, add.Path, err)
	}
	return nil
}

// guard is the Conflict judge of a commit adding the set's events: a
// winning commit whose new rows hold one of them (another run published
// it, or a rebuild copied it, after the table was read) refuses the
// commit. Compactions change no data (dataChange=false) and are not read.
func (s *idSet) guard(ctx context.Context, st storage.Store) func(int64, []delta.Action) error {
	return func(v int64, winner []delta.Action) error {
		for _, a := range winner {
			if a.Add == nil || !a.Add.DataChange {
				continue
			}
			hit := ""
			if err := s.read(ctx, st, *a.Add, func(id string) bool { hit = id; return false }); err != nil {
				return err
			}
			if hit != "" {
				return fmt.Errorf("version %d holds event %s: %w", v, hit, errConflict)
			}
		}
		return nil
	}
}
