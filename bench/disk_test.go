package bench

import (
	"os"
	"testing"
)

func TestDiskFloorTimesEachOperationAndCleansUp(t *testing.T) {
	dir := t.TempDir()
	f, err := diskFloor(dir)
	if err != nil {
		t.Fatal(err)
	}
	if f.FsyncP50Ms <= 0 || f.PutP50Ms <= 0 || f.BatchP50Ms <= 0 || f.BatchPuts != batchPuts {
		t.Fatalf("floor %+v: want every figure measured", f)
	}
	if f.FsyncP99Ms < f.FsyncP50Ms || f.PutP99Ms < f.PutP50Ms || f.BatchP99Ms < f.BatchP50Ms {
		t.Errorf("floor %+v: a p99 below its p50", f)
	}
	t.Logf("fsync %.2f ms, put %.2f ms, %d puts at once %.2f ms (p50)", f.FsyncP50Ms, f.PutP50Ms, f.BatchPuts, f.BatchP50Ms)
	left, err := os.ReadDir(dir)
	if err != nil || len(left) != 0 {
		t.Errorf("left in the folder: %v (err %v)", left, err)
	}
}
