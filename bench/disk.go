package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/deltabus/deltabus/verify"
)

// DiskFloor is the local disk's own cost of what a commit does, measured
// in the store's file system in the same run as the latency: an fsync of
// a small file, and a put-if-absent as storage.Local makes one (create a
// temporary file, write 20 KB, fsync, link(2) to the final name, unlink the
// temporary, fsync the directory). A commit of a batch writes one data
// file and one log entry per topic, each such a put; and it writes a
// batch's data files together, then its log entries together, one per
// table, each table in a folder of its own: BatchPuts puts at once, each
// in a folder of its own, is what one of those two steps costs the disk.
type DiskFloor struct {
	FsyncP50Ms float64 `json:"fsyncP50Ms"`
	FsyncP99Ms float64 `json:"fsyncP99Ms"`
	PutP50Ms   float64 `json:"putP50Ms"` // create+write 20 KB+fsync+link+dir fsync
	PutP99Ms   float64 `json:"putP99Ms"`
	BatchPuts  int     `json:"batchPuts"` // puts at once, each in a folder of its own
	BatchP50Ms float64 `json:"batchP50Ms"`
	BatchP99Ms float64 `json:"batchP99Ms"`
}

// diskRounds is how many of each operation diskFloor times.
const diskRounds = 500

// batchPuts is how many puts at once diskFloor times: the latency run's
// five topics.
const batchPuts = 5

// diskFloor times diskRounds fsyncs and puts in a fresh folder under dir.
func diskFloor(dir string) (DiskFloor, error) {
	d, err := os.MkdirTemp(dir, "disk-floor-")
	if err != nil {
		return DiskFloor{}, err
	}
	defer os.RemoveAll(d)
	data := make([]byte, 20<<10)
	f, err := os.Create(filepath.Join(d, "fsync"))
	if err != nil {
		return DiskFloor{}, err
	}
	defer f.Close()
	var syncs, puts []time.Duration
	for i := range diskRounds {
		if _, err := f.WriteAt(data[:512], 0); err != nil {
			return DiskFloor{}, err
		}
		t := time.Now()
		if err := f.Sync(); err != nil {
			return DiskFloor{}, err
		}
		syncs = append(syncs, time.Since(t))
		t = time.Now()
		if err := putIfAbsent(d, fmt.Sprintf("%020d.json", i), data); err != nil {
			return DiskFloor{}, err
		}
		puts = append(puts, time.Since(t))
	}
	batches, err := batchFloor(d, data)
	if err != nil {
		return DiskFloor{}, err
	}
	p := func(v []time.Duration, q float64) float64 { return ms(verify.Percentile(v, q)) }
	return DiskFloor{FsyncP50Ms: p(syncs, 50), FsyncP99Ms: p(syncs, 99), PutP50Ms: p(puts, 50), PutP99Ms: p(puts, 99),
		BatchPuts: batchPuts, BatchP50Ms: p(batches, 50), BatchP99Ms: p(batches, 99)}, nil
}

// batchFloor times diskRounds/batchPuts rounds of batchPuts puts at once,
// each in a folder of its own under d.
func batchFloor(d string, data []byte) ([]time.Duration, error) {
	dirs := make([]string, batchPuts)
	for i := range dirs {
		dirs[i] = filepath.Join(d, fmt.Sprintf("table%d", i))
		if err := os.Mkdir(dirs[i], 0o755); err != nil {
			return nil, err
		}
	}
	var out []time.Duration
	for i := range diskRounds / batchPuts {
		var g errgroup.Group
		t := time.Now()
		for _, dir := range dirs {
			g.Go(func() error { return putIfAbsent(dir, fmt.Sprintf("%020d.json", i), data) })
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t))
	}
	return out, nil
}

// putIfAbsent is storage.Local's put-if-absent, step by step.
func putIfAbsent(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, "."+name+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	if err := os.Remove(tmp); err != nil {
		return err
	}
	df, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer df.Close()
	return df.Sync()
}
