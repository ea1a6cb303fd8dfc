// Package retentiontest cleans a Delta log the way log clean-up does, for
// tests of what consumers do once retention passed them.
package retentiontest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// CleanLog keeps a checkpoint at version keep (writing one when the table
// has none there) and deletes every commit and checkpoint before it, as
// metadata clean-up does once keep's commit is past
// delta.logRetentionDuration. tbl is the table root.
func CleanLog(t testing.TB, tbl storage.Store, keep int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := tbl.Get(ctx, delta.CheckpointKey(keep)); err != nil {
		snap, err := delta.LoadSnapshot(ctx, tbl, keep)
		if err != nil {
			t.Fatal(err)
		}
		if err := delta.WriteCheckpoint(ctx, tbl, snap, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := tbl.List(ctx, delta.LogDir, "")
	if err != nil {
		t.Fatal(err)
	}
	cut := fmt.Sprintf("%020d", keep)
	for _, o := range objs {
		name := strings.TrimPrefix(o.Key, delta.LogDir)
		if len(name) > 20 && name[:20] < cut {
			if err := tbl.Delete(ctx, o.Key); err != nil {
				t.Fatal(err)
			}
		}
	}
}
