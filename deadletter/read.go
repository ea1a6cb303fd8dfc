package deadletter

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/republish"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// Filter chooses dead letters; the zero Filter chooses every one. Each
// list matches any of its values; the fields combine with AND.
type Filter struct {
	Topics  []string // the row's topic value
	Types   []string // the row's event type
	Sources []string // the relay (appId) that wrote it
	IDs     []string // the dead letter's id (the row's uuid, or dl-<lsn>-<seq>)
	// Reason matches a dead letter whose reason, or latest reason, holds
	// it (case-insensitive).
	Reason string
	// Since and Until bound the source commit time: [Since, Until).
	Since, Until time.Time
}

// Letter is one dead letter and the latest redrive that considered it.
type Letter struct {
	outbox.DeadLetter
	// Latest is the newest redrive outcome of the dead letter (nil: never
	// redriven): republished or present means it is in its topic; refused
	// means it still fails, and its Reason is the latest reason.
	Latest *republish.AuditRow
}

// Redriven reports whether the dead letter's event is in its topic.
func (l Letter) Redriven() bool {
	return l.Latest != nil && (l.Latest.Status == republish.Republished || l.Latest.Status == republish.Present)
}

// CurrentReason is why the dead letter is not in its topic: the latest
// redrive's reason, else the reason it was dead-lettered for ("" once
// redriven).
func (l Letter) CurrentReason() string {
	switch {
	case l.Redriven():
		return ""
	case l.Latest != nil && l.Latest.Status == republish.Refused:
		return l.Latest.Reason
	}
	return l.Reason
}

// State is "dead", "redriven" or "still failing".
func (l Letter) State() string {
	switch {
	case l.Redriven():
		return "redriven"
	case l.Latest != nil:
		return "still failing"
	}
	return "dead"
}

// letterKey identifies a dead letter: its source's row at (commit LSN,
// seq). A redrive keeps both in the event, and in its _republished row.
type letterKey struct {
	source string
	lsn    int64
	seq    int32
}

// Read returns the dead letters f chooses, in (source, commit LSN, seq)
// order (each source's commit order), with their latest redrive. It reads
// only the _dead_letter files whose statistics may hold them.
func Read(ctx context.Context, root storage.Store, f Filter) ([]Letter, error) {
	st := storage.Sub(root, outbox.DeadLetterTopic)
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if errors.Is(err, delta.ErrNoTable) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the dead-letter table: %w", err)
	}
	latest, err := latestRedrives(ctx, root)
	if err != nil {
		return nil, err
	}
	var out []Letter
	for _, add := range snap.Files {
		if !f.mayHold(add.Stats) {
			continue
		}
		err := topic.ReadDeadLetters(ctx, st, add, func(dl outbox.DeadLetter) error {
			l := Letter{DeadLetter: dl}
			if r, ok := latest[letterKey{dl.Source, dl.CommitLSN, dl.Seq}]; ok {
				l.Latest = &r
			}
			if f.matches(&l) {
				out = append(out, l)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read dead letters of %s: %w", add.Path, err)
		}
	}
	slices.SortStableFunc(out, func(a, b Letter) int {
		return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(a.CommitLSN, b.CommitLSN), cmp.Compare(a.Seq, b.Seq))
	})
	return out, nil
}

// latestRedrives returns, per dead letter, the newest redrive outcome.
func latestRedrives(ctx context.Context, root storage.Store) (map[letterKey]republish.AuditRow, error) {
	out := map[letterKey]republish.AuditRow{}
	err := republish.ReadAudit(ctx, root, func(r republish.AuditRow) error {
		if r.Kind != republish.KindRedrive {
			return nil
		}
		k := letterKey{r.Source, r.CommitLSN, r.Seq}
		if cur, ok := out[k]; !ok || r.RunAt.After(cur.RunAt) || (r.RunAt.Equal(cur.RunAt) && r.RunID > cur.RunID) {
			out[k] = r
		}
		return nil
	})
	return out, err
}

func (f Filter) matches(l *Letter) bool {
	in := func(list []string, v string) bool { return len(list) == 0 || slices.Contains(list, v) }
	switch {
	case !in(f.Topics, l.Topic), !in(f.Types, l.Type), !in(f.Sources, l.Source), !in(f.IDs, l.ID):
		return false
	case !f.Since.IsZero() && l.CommitTime.Before(f.Since), !f.Until.IsZero() && !l.CommitTime.Before(f.Until):
		return false
	case f.Reason != "":
		want := strings.ToLower(f.Reason)
		return strings.Contains(strings.ToLower(l.Reason), want) || strings.Contains(strings.ToLower(l.CurrentReason()), want)
	}
	return true
}

// mayHold reports, from a data file's statistics, whether it may hold a
// dead letter of the filter's topics, sources and time range.
func (f Filter) mayHold(stats string) bool {
	if stats == "" {
		return true
	}
	var s struct {
		Min map[string]any `json:"minValues"`
		Max map[string]any `json:"maxValues"`
	}
	if json.Unmarshal([]byte(stats), &s) != nil {
		return true
	}
	within := func(col string, vals []string) bool {
		lo, ok1 := s.Min[col].(string)
		hi, ok2 := s.Max[col].(string)
		if !ok1 || !ok2 || len(vals) == 0 {
			return true
		}
		return slices.ContainsFunc(vals, func(v string) bool { return lo <= v && v <= hi })
	}
	if !within("topic", f.Topics) || !within("source", f.Sources) {
		return false
	}
	if hi, ok := s.Max["commit_time"].(string); ok && !f.Since.IsZero() {
		if t, err := time.Parse(time.RFC3339Nano, hi); err == nil && t.Before(f.Since.Truncate(time.Millisecond)) {
			return false
		}
	}
	if lo, ok := s.Min["commit_time"].(string); ok && !f.Until.IsZero() {
		if t, err := time.Parse(time.RFC3339Nano, lo); err == nil && !t.Before(f.Until) {
			return false
		}
	}
	return true
}

// History returns every redrive outcome of the dead letter, oldest first.
func History(ctx context.Context, root storage.Store, dl *outbox.DeadLetter) ([]republish.AuditRow, error) {
	var out []republish.AuditRow
	err := republish.ReadAudit(ctx, root, func(r republish.AuditRow) error {
		if r.Kind == republish.KindRedrive && r.Source == dl.Source && r.CommitLSN == dl.CommitLSN && r.Seq == dl.Seq {
			out = append(out, r)
		}
		return nil
	})
	slices.SortFunc(out, func(a, b republish.AuditRow) int {
		return cmp.Or(a.RunAt.Compare(b.RunAt), cmp.Compare(a.RunID, b.RunID))
	})
	return out, err
}
