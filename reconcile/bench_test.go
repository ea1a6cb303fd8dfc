package reconcile

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// BenchmarkReconcile1M reconciles 1M events over 5 topics in one 24h range
// (24 windows) and compares with the source's own count(*) group by topic
// plus a DuckDB count over the same parquet files. Setup (~1 min) is not
// timed. Needs node and @duckdb/node-api (scripts/install-duckdb.sh).
func BenchmarkReconcile1M(b *testing.B) {
	e := newEnv(b)
	e.base = time.Now().UTC().Truncate(time.Hour).Add(-26 * time.Hour)
	const perTopic, chunk = 200_000, 20_000
	for ti := 0; ti < 5; ti++ {
		name := fmt.Sprintf("topic%d", ti)
		evs := events(name, perTopic, e.base, 24*time.Hour)
		for i := 0; i < perTopic; i += chunk {
			e.insertSource(evs[i : i+chunk])
			e.commitLog(name, evs[i:i+chunk], "deltabus-deltabus", 0)
		}
	}
	e.db.Exec(b, `VACUUM ANALYZE outbox`)
	e.advanceSlot()
	ctx := context.Background()
	conn := e.db.Conn(b)
	pg := best(3, func() {
		rows, err := conn.Query(ctx, `SELECT topic, count(*) FROM outbox WHERE occurred_at >= $1 AND occurred_at < $2 GROUP BY topic`,
			e.base, e.base.Add(24*time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		rows.Close()
	})
	duck := duckCount(b, e.root)
	clearPeakRSS()
	var took, fastest time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep := e.run(24, nil)
		if rep.ExitCode() != ExitClean || len(rep.Results) != 120 {
			b.Fatalf("exit %d with %d results", rep.ExitCode(), len(rep.Results))
		}
		took += rep.Took
		if fastest == 0 || rep.Took < fastest {
			fastest = rep.Took
		}
	}
	b.StopTimer()
	per := took / time.Duration(b.N)
	b.ReportMetric(per.Seconds()*1000, "reconcile-ms")
	b.ReportMetric(fastest.Seconds()*1000, "reconcile-best-ms")
	b.ReportMetric(pg.Seconds()*1000, "pg-count-ms")
	b.ReportMetric(duck.Seconds()*1000, "duckdb-count-ms")
	// Like for like: the baselines are best of 3, so is this ratio.
	b.ReportMetric(fastest.Seconds()/(pg+duck).Seconds(), "x-baseline")
	b.ReportMetric(per.Seconds()/(pg+duck).Seconds(), "x-baseline-mean")
	b.ReportMetric(float64(peakRSS())/(1<<20), "peak-rss-MiB")
}

func best(n int, fn func()) time.Duration {
	var m time.Duration
	for i := 0; i < n; i++ {
		s := time.Now()
		fn()
		if d := time.Since(s); i == 0 || d < m {
			m = d
		}
	}
	return m
}

// duckCount times (inside node, best of 3) a DuckDB count(*) over the
// active parquet files of every topic.
func duckCount(b *testing.B, root storage.Store) time.Duration {
	dir := os.Getenv("DELTABUS_DUCKDB_DIR")
	if dir == "" {
		dir = filepath.Join(os.Getenv("HOME"), ".cache/deltabus/duckdb")
	}
	var files []string
	local := root.String()[len("file://"):]
	for ti := 0; ti < 5; ti++ {
		name := fmt.Sprintf("topic%d", ti)
		snap, err := delta.LoadSnapshot(context.Background(), storage.Sub(root, name), -1)
		if err != nil {
			b.Fatal(err)
		}
		for _, a := range snap.Files {
			files = append(files, "'"+filepath.Join(local, name, a.Path)+"'")
		}
	}
	script := `const d = require(process.argv[1]);
(async () => {
  const inst = await d.DuckDBInstance.create(':memory:', {autoinstall_known_extensions: 'false', autoload_known_extensions: 'false'});
  const c = await inst.connect();
  let best = 1e9, n = 0;
  for (let i = 0; i < 3; i++) {
    const s = process.hrtime.bigint();
    const r = await c.runAndReadAll("SELECT count(*) FROM read_parquet([` + strings.Join(files, ",") + `])");
    n = r.getRows()[0][0];
    best = Math.min(best, Number(process.hrtime.bigint() - s) / 1e6);
  }
  console.log(String(n) + " " + best);
})();`
	out, err := exec.Command("node", "-e", script, filepath.Join(dir, "node_modules/@duckdb/node-api")).CombinedOutput()
	if err != nil {
		b.Skipf("duckdb: %v: %s", err, out)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 || f[0] != "1000000" {
		b.Fatalf("duckdb counted %q, want 1000000", out)
	}
	ms, _ := strconv.ParseFloat(f[1], 64)
	return time.Duration(ms * float64(time.Millisecond))
}

func clearPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

func peakRSS() int64 {
	data, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			kb, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
