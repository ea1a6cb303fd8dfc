package statuspage

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"sort"
	"time"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// Bounds of the dead-letter count: the newest files of the last hour and
// the most frequent reasons; the rest is counted as "other reasons".
const (
	maxDeadLetterFiles = 64
	maxReasons         = 20
)

var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)

// reasonClass is a reason with its quoted parts (names, values a producer
// wrote) replaced by "…".
func reasonClass(r string) string {
	r = quoted.ReplaceAllString(r, `"…"`)
	if len(r) > 300 {
		r = r[:300] + "…"
	}
	return r
}

// deadLetters counts the dead letters whose source commit is at or after
// since, by reason class, reading only the files whose commit_time
// statistics reach since.
func deadLetters(ctx context.Context, root storage.Store, since time.Time) (DeadLetters, error) {
	out := DeadLetters{Since: since, ByReason: []ReasonCount{}}
	st := storage.Sub(root, outbox.DeadLetterTopic)
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if errors.Is(err, delta.ErrNoTable) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	var recent []delta.Add
	for _, a := range snap.Files {
		var s struct {
			MaxValues map[string]any `json:"maxValues"`
		}
		_ = json.Unmarshal([]byte(a.Stats), &s)
		if max, ok := s.MaxValues["commit_time"].(string); ok {
			if t, err := time.Parse(time.RFC3339Nano, max); err == nil && t.Before(since) {
				continue
			}
		}
		recent = append(recent, a)
	}
	sort.Slice(recent, func(i, j int) bool { return recent[i].ModificationTime > recent[j].ModificationTime })
	counts := map[string]int64{}
	for i, a := range recent {
		if i >= maxDeadLetterFiles {
			break
		}
		err := topic.ReadDeadLetters(ctx, st, a, func(dl outbox.DeadLetter) error {
			if !dl.CommitTime.Before(since) {
				counts[reasonClass(dl.Reason)]++
				out.Total++
			}
			return nil
		})
		if err != nil {
			return out, err
		}
	}
	for r, n := range counts {
		out.ByReason = append(out.ByReason, ReasonCount{Reason: r, Count: n})
	}
	sort.Slice(out.ByReason, func(i, j int) bool {
		a, b := out.ByReason[i], out.ByReason[j]
		return a.Count > b.Count || (a.Count == b.Count && a.Reason < b.Reason)
	})
	if len(out.ByReason) > maxReasons {
		var rest int64
		for _, r := range out.ByReason[maxReasons:] {
			rest += r.Count
		}
		out.ByReason = append(out.ByReason[:maxReasons], ReasonCount{Reason: "other reasons", Count: rest})
	}
	return out, nil
}
