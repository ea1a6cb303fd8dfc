package delta

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Table properties whose values DeltaBus reads (delta-protocol.md §2).
const (
	PropLogRetention         = "delta.logRetentionDuration"
	PropDeletedFileRetention = "delta.deletedFileRetentionDuration"
	PropCheckpointInterval   = "delta.checkpointInterval"
	PropExpiredLogCleanup    = "delta.enableExpiredLogCleanup"
)

// Defaults of the retention properties (delta-spark's).
const (
	DefaultLogRetention         = 30 * 24 * time.Hour
	DefaultDeletedFileRetention = 7 * 24 * time.Hour
)

// MinRetention is the shortest retention SetProperties accepts for
// delta.logRetentionDuration and delta.deletedFileRetentionDuration: a
// data file must be committed, and a compaction finished, within the
// deleted-file retention, or VACUUM could delete its files first.
const MinRetention = time.Hour

// MinExplicitRetention is the shortest explicit retention CleanupLog and
// Vacuum take (CleanupOptions.Retention, VacuumOptions.Retention: tests and
// accelerated soak runs). Below a writer's reload interval (ReloadAfter, a
// minute) log clean-up could free the version an idle writer commits after,
// and VACUUM delete a data file between its upload and its commit.
const MinExplicitRetention = DefaultReloadAfter

// propertyRules validates the delta.* properties SetProperties may change.
// Properties that need a protocol change (column mapping, deletion
// vectors, in-commit timestamps, row tracking, ...) are refused, as is
// delta.setTransactionRetentionDuration: exactly-once appends depend on
// txns never expiring.
var propertyRules = map[string]func(string) error{
	PropLogRetention:                    retentionRule,
	PropDeletedFileRetention:            retentionRule,
	"delta.checkpointRetentionDuration": retentionRule,
	PropCheckpointInterval:              intRule(1, 1_000_000),
	"delta.dataSkippingNumIndexedCols":  intRule(-1, 1_000_000),
	PropExpiredLogCleanup:               boolRule,
	"delta.appendOnly":                  boolRule,
	"delta.enableChangeDataFeed":        boolRule,
	"delta.setTransactionRetentionDuration": func(string) error {
		return fmt.Errorf("refused: txns must never expire on a table written exactly once through them")
	},
}

func retentionRule(v string) error {
	if !strings.HasPrefix(strings.ToLower(strings.TrimSpace(v)), "interval ") {
		return fmt.Errorf("%q: want the form \"interval N days\" (or hours, minutes, weeks)", v)
	}
	d, err := ParseInterval(v)
	if err != nil {
		return err
	}
	if d < MinRetention {
		return fmt.Errorf("%q is shorter than the minimum of %s", v, MinRetention)
	}
	return nil
}

func intRule(lo, hi int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("%q: want an integer from %d to %d", v, lo, hi)
		}
		return nil
	}
}

func boolRule(v string) error {
	if v != "true" && v != "false" {
		return fmt.Errorf("%q: want true or false", v)
	}
	return nil
}

// ValidateProperty checks one table property a caller wants to set. Keys
// outside the delta. namespace are free-form (non-empty, no whitespace or
// control characters); delta.* keys must be known to this writer and have
// a valid value: durations in Delta's "interval N days" form, at least
// MinRetention; booleans "true"/"false"; integers in range.
func ValidateProperty(key, value string) error {
	if key == "" || strings.IndexFunc(key, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return fmt.Errorf("table property name %q: must be non-empty, without spaces or control characters", key)
	}
	if !strings.HasPrefix(strings.ToLower(key), "delta.") {
		return nil
	}
	rule, ok := propertyRules[key]
	if !ok {
		return fmt.Errorf("table property %s: not a property this writer can set (unknown, or needs a protocol change)", key)
	}
	if err := rule(value); err != nil {
		return fmt.Errorf("table property %s: %w", key, err)
	}
	return nil
}

// SetProperties commits a metaData change setting the given table
// properties (operation "SET TBLPROPERTIES", as delta-spark and delta-rs
// write it) and returns the new version, or the current one when every
// property already has the requested value. Each property is checked with
// ValidateProperty before anything is written, and the resulting table
// with the protocol gates (e.g. delta.appendOnly=true needs the appendOnly
// writer feature).
func SetProperties(ctx context.Context, t *Table, props map[string]string) (int64, error) {
	for _, k := range slices.Sorted(maps.Keys(props)) {
		if err := ValidateProperty(k, props[k]); err != nil {
			return -1, fmt.Errorf("set properties of %s: %w", t.store, err)
		}
	}
	enc, _ := json.Marshal(props)
	v, err := t.UpdateMetadata(ctx, MetadataChange{
		Operation:           "SET TBLPROPERTIES",
		OperationParameters: map[string]string{"properties": string(enc)},
		Update: func(m *Metadata) error {
			maps.Copy(m.Configuration, props)
			return nil
		},
	})
	if err != nil {
		return -1, fmt.Errorf("set properties of %s: %w", t.store, err)
	}
	return v, nil
}

// UnsetProperties commits a metaData change removing table properties
// (operation "UNSET TBLPROPERTIES"), so they fall back to their defaults.
// Absent keys are ignored; delta.* keys must be ones SetProperties may set.
func UnsetProperties(ctx context.Context, t *Table, keys ...string) (int64, error) {
	for _, k := range keys {
		if _, ok := propertyRules[k]; !ok && strings.HasPrefix(strings.ToLower(k), "delta.") {
			return -1, fmt.Errorf("unset properties of %s: table property %s is not one this writer can change", t.store, k)
		}
	}
	enc, _ := json.Marshal(keys)
	v, err := t.UpdateMetadata(ctx, MetadataChange{
		Operation:           "UNSET TBLPROPERTIES",
		OperationParameters: map[string]string{"properties": string(enc), "ifExists": "true"},
		Update: func(m *Metadata) error {
			for _, k := range keys {
				delete(m.Configuration, k)
			}
			return nil
		},
	})
	if err != nil {
		return -1, fmt.Errorf("unset properties of %s: %w", t.store, err)
	}
	return v, nil
}
