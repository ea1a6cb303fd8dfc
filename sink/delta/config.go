package delta

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DefaultCheckpointInterval is delta.checkpointInterval's default.
const DefaultCheckpointInterval = 10

// DefaultCheckpointSpacing is the relay's Options.CheckpointSpacing: at
// 2,000 single-row transactions a second into five tables, checkpointing
// each table every 100 commits (about once a second) put the background
// encoding in the tail of every commit's latency; 10 s apart, readers
// replay at most 1,000 commits (maxSpacedIntervals).
const DefaultCheckpointSpacing = 10 * time.Second

// CheckpointInterval returns delta.checkpointInterval (default 10; invalid or
// non-positive values fall back to the default).
func CheckpointInterval(m Metadata) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(m.Configuration["delta.checkpointInterval"]), 10, 64)
	if err != nil || n <= 0 {
		return DefaultCheckpointInterval
	}
	return n
}

// Retention reads a CalendarInterval table property ("interval 7 days") as
// a duration, or def when the property is unset, unparsable or not
// positive.
func Retention(m Metadata, key string, def time.Duration) time.Duration {
	v, ok := m.Configuration[key]
	if !ok {
		return def
	}
	d, err := ParseInterval(v)
	if err != nil || d <= 0 {
		return def
	}
	return d
}

var intervalUnits = map[string]time.Duration{
	"microsecond": time.Microsecond, "millisecond": time.Millisecond, "second": time.Second,
	"minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour, "week": 7 * 24 * time.Hour,
}

// ParseInterval parses the CalendarInterval form used by Delta table
// properties: "interval 30 days", "interval 1 week 2 hours" (months and years
// are not fixed durations and are refused).
func ParseInterval(s string) (time.Duration, error) {
	f := strings.Fields(strings.ToLower(s))
	if len(f) > 0 && f[0] == "interval" {
		f = f[1:]
	}
	if len(f) == 0 || len(f)%2 != 0 {
		return 0, fmt.Errorf("interval %q: want \"interval N unit ...\"", s)
	}
	var total time.Duration
	for i := 0; i < len(f); i += 2 {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("interval %q: %w", s, err)
		}
		unit, ok := intervalUnits[strings.TrimSuffix(f[i+1], "s")]
		if !ok {
			return 0, fmt.Errorf("interval %q: unsupported unit %q", s, f[i+1])
		}
		total += time.Duration(n) * unit
	}
	return total, nil
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "null"
	}
	return string(b)
}
