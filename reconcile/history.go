package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// TopicLast is a topic's verdict in the last recorded run that checked it
// (the _reconciliation table), summed over that run's windows.
type TopicLast struct {
	Topic      string    `json:"topic"`
	RunID      string    `json:"runId"`
	RunAt      time.Time `json:"runAt"`
	Status     Status    `json:"status"` // the worst of the run's windows
	Windows    int       `json:"windows"`
	Missing    int64     `json:"missing"`
	Duplicates int64     `json:"duplicates"`
	Unexpected int64     `json:"unexpected"`
	// Repaired is how many missing events the run's repair published
	// (relay reconcile --repair).
	Repaired int64  `json:"repaired,omitempty"`
	Error    string `json:"error,omitempty"`
}

// LastResults returns, per topic, the verdict of the newest recorded run
// that checked it, reading at most maxFiles of the table's newest data
// files (one per recorded run); an absent table is no result.
func LastResults(ctx context.Context, root storage.Store, maxFiles int) (map[string]TopicLast, error) {
	st := storage.Sub(root, ReconciliationTable)
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if errors.Is(err, delta.ErrNoTable) {
		return map[string]TopicLast{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", ReconciliationTable, err)
	}
	type dated struct {
		add   delta.Add
		runAt string
	}
	files := make([]dated, 0, len(snap.Files))
	for _, a := range snap.Files {
		var s struct {
			MaxValues map[string]string `json:"maxValues"`
		}
		_ = json.Unmarshal([]byte(a.Stats), &s)
		files = append(files, dated{a, s.MaxValues["run_at"]})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].runAt > files[j].runAt })
	out := map[string]TopicLast{}
	rank := map[Status]int{StatusClean: 0, StatusError: 1, StatusUnreadable: 2, StatusDiverged: 3}
	for i, f := range files {
		if i >= maxFiles {
			break
		}
		data, err := st.Get(ctx, f.add.Path)
		if err != nil {
			return nil, fmt.Errorf("read %s/%s: %w", ReconciliationTable, f.add.Path, err)
		}
		rows, err := readRecorded(ctx, data)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", ReconciliationTable, f.add.Path, err)
		}
		for _, r := range rows {
			cur, seen := out[r.Topic]
			switch {
			case !seen || r.RunAt.After(cur.RunAt):
				cur = TopicLast{Topic: r.Topic, RunID: r.RunID, RunAt: r.RunAt, Status: StatusClean}
			case r.RunID != cur.RunID:
				continue // an older run of the topic
			}
			cur.Windows++
			cur.Missing += r.Missing
			cur.Duplicates += r.Duplicates
			cur.Unexpected += r.Unexpected
			cur.Repaired += r.Repaired
			if rank[r.Status] > rank[cur.Status] {
				cur.Status = r.Status
			}
			if r.Error != "" && cur.Error == "" {
				cur.Error = r.Error
			}
			out[r.Topic] = cur
		}
	}
	return out, nil
}

// recorded is one row of the _reconciliation table, the columns
// LastResults reads.
type recorded struct {
	RunID, Topic, Error             string
	RunAt                           time.Time
	Status                          Status
	Missing, Duplicates, Unexpected int64
	Repaired                        int64
}

func readRecorded(ctx context.Context, data []byte) ([]recorded, error) {
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("open parquet: %w", err)
	}
	defer pf.Close()
	names := []string{"run_id", "run_at", "topic", "status", "missing", "duplicates", "unexpected", "error"}
	idx := make([]int, len(names))
	for i, n := range names {
		if idx[i] = pf.MetaData().Schema.ColumnIndexByName(n); idx[i] < 0 {
			return nil, fmt.Errorf("no column %s", n)
		}
	}
	if i := pf.MetaData().Schema.ColumnIndexByName("repaired"); i >= 0 { // rows of later releases
		idx = append(idx, i)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 4096}, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	rr, err := fr.GetRecordReader(ctx, idx, nil)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	var out []recorded
	for rr.Next() {
		rec := rr.RecordBatch()
		col := func(name string) arrow.Array {
			for i, f := range rec.Schema().Fields() {
				if f.Name == name {
					return rec.Column(i)
				}
			}
			return nil
		}
		runID, _ := col("run_id").(*array.String)
		runAt, _ := col("run_at").(*array.Timestamp)
		topic, _ := col("topic").(*array.String)
		status, _ := col("status").(*array.String)
		missing, _ := col("missing").(*array.Int64)
		dups, _ := col("duplicates").(*array.Int64)
		unexp, _ := col("unexpected").(*array.Int64)
		errs, _ := col("error").(*array.String)
		repaired, _ := col("repaired").(*array.Int64)
		if runID == nil || runAt == nil || topic == nil || status == nil || missing == nil || dups == nil || unexp == nil || errs == nil {
			return nil, fmt.Errorf("unexpected column types")
		}
		for i := range int(rec.NumRows()) {
			r := recorded{RunID: runID.Value(i), Topic: topic.Value(i), Status: Status(status.Value(i)),
				RunAt: time.UnixMicro(int64(runAt.Value(i))).UTC(), Missing: missing.Value(i), Duplicates: dups.Value(i), Unexpected: unexp.Value(i)}
			if errs.IsValid(i) {
				r.Error = errs.Value(i)
			}
			if repaired != nil && repaired.IsValid(i) {
				r.Repaired = repaired.Value(i)
			}
			out = append(out, r)
		}
	}
	return out, rr.Err()
}
