package delta

import (
	"context"
	"log/slog"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// failOnWarn is a slog handler that fails the test on any warning, so a
// checkpoint silently skipped as unreadable cannot pass as a success.
type failOnWarn struct {
	slog.Handler
	t *testing.T
}

func (h failOnWarn) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.t.Errorf("unexpected log: %s", r.Message)
		r.Attrs(func(a slog.Attr) bool { h.t.Errorf("  %s=%v", a.Key, a.Value); return true })
	}
	return nil
}

// TestConformanceCheckpointReplay reads every checkpoint of the shared tables
// (delta-spark key_value maps, arrow-rs entries maps, 2019 Spark, multi-part)
// and requires the state to equal a JSON-only replay of the same log.
func TestConformanceCheckpointReplay(t *testing.T) {
	wantCP := map[string]int64{
		"delta-basic-with-inserts-deletes-checkpoint": 10,
		"delta-checkpoint":                            10,
		"delta-corrupted-last-checkpoint-kernel":      10,
		"delta-multi-part-checkpoint":                 1,
		"deltars-delta-0.2.0":                         3,
		"kernelrs-app-txn-checkpoint":                 1,
	}
	ctx := context.Background()
	for root, exp := range conformanceTables(t) {
		name := filepath.Base(root)
		cp, ok := wantCP[name]
		if !ok || exp.Expected.Error != "" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			store := readOnlyStore(t, root)
			log := slog.New(failOnWarn{slog.DiscardHandler, t})
			withCP, err := loadSnapshot(ctx, store, -1, log, true)
			if err != nil {
				t.Fatal(err)
			}
			if withCP.CheckpointVersion != cp {
				t.Fatalf("checkpoint used = %d, want %d", withCP.CheckpointVersion, cp)
			}
			l, err := listLog(ctx, store, 0)
			if err != nil {
				t.Fatal(err)
			}
			l.Checkpoints = nil
			jsonOnly, err := replayFrom(ctx, store, l, withCP.Version, log, true)
			if err != nil {
				t.Fatal(err)
			}
			compareSnapshots(t, withCP, jsonOnly)
		})
	}
}

// compareSnapshots requires equal reconciled state (adds compared without
// dataChange, which checkpoints rewrite to false).
func compareSnapshots(t *testing.T, a, b *Snapshot) {
	t.Helper()
	if a.Version != b.Version {
		t.Errorf("version %d vs %d", a.Version, b.Version)
	}
	if !reflect.DeepEqual(a.Protocol, b.Protocol) {
		t.Errorf("protocol %+v vs %+v", a.Protocol, b.Protocol)
	}
	if !reflect.DeepEqual(normMeta(a.Metadata), normMeta(b.Metadata)) {
		t.Errorf("metadata %+v vs %+v", a.Metadata, b.Metadata)
	}
	if !reflect.DeepEqual(a.Txns, b.Txns) {
		t.Errorf("txns %v vs %v", a.Txns, b.Txns)
	}
	ka, kb := slices.Sorted(maps.Keys(a.Files)), slices.Sorted(maps.Keys(b.Files))
	if !slices.Equal(ka, kb) {
		t.Fatalf("active files differ:\n%s\nvs\n%s", strings.Join(ka, "\n"), strings.Join(kb, "\n"))
	}
	for k, fa := range a.Files {
		fb := b.Files[k]
		fa.DataChange, fb.DataChange = false, false
		if !reflect.DeepEqual(normAdd(fa), normAdd(fb)) {
			t.Errorf("file %s:\n%+v\nvs\n%+v", k, fa, fb)
		}
	}
}

func normMeta(m Metadata) Metadata {
	if len(m.Configuration) == 0 {
		m.Configuration = nil
	}
	if len(m.PartitionColumns) == 0 {
		m.PartitionColumns = nil
	}
	if len(m.Format.Options) == 0 {
		m.Format.Options = nil
	}
	return m
}

func normAdd(a Add) Add {
	if len(a.PartitionValues) == 0 {
		a.PartitionValues = nil
	}
	if len(a.Tags) == 0 {
		a.Tags = nil
	}
	return a
}
