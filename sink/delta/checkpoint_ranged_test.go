package delta

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
)

// TestRangedCheckpointReadMatchesWhole: a reader's load of a checkpoint
// read in parts from a local store (its footer and the column chunks it
// decodes) gives exactly the actions of the same file fetched whole, for
// the checkpoints of other writers and for ours (tombstones included).
func TestRangedCheckpointReadMatchesWhole(t *testing.T) {
	ctx := context.Background()
	check := func(name, dir, key string, data []byte) {
		t.Helper()
		local, err := storage.NewLocal(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := storage.OpenObject(ctx, local, key); err != nil {
			t.Fatalf("%s: local store does not read in parts: %v", name, err)
		}
		ranged, err := readCheckpointPart(ctx, local, key, false)
		if err != nil {
			t.Fatalf("%s: ranged read: %v", name, err)
		}
		whole, err := parseCheckpoint(ctx, data, false)
		if err != nil {
			t.Fatalf("%s: whole read: %v", name, err)
		}
		sameActions(t, name, ranged, whole)
	}
	for p, data := range conformanceCheckpoints(t) {
		check(p, filepath.Dir(p), filepath.Base(p), data)
	}
	for name, snap := range flatSnapshots() {
		data, _, _, err := EncodeCheckpoint(snap, time.UnixMilli(2000))
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "cp.parquet"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		check(name, dir, "cp.parquet", data)
	}
	// A missing part is ErrNotFound, as Get says it.
	local, _ := storage.NewLocal(t.TempDir())
	if _, err := readCheckpointPart(ctx, local, "missing.parquet", false); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("missing checkpoint: %v, want ErrNotFound", err)
	}
}
