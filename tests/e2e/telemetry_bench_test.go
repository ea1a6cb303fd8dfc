package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/bench"
	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/tests/otlptest"
	"github.com/deltabus/deltabus/tests/pgtest"
)

// BenchmarkTracingOverhead measures the relay's CPU per event with tracing
// off, on with a parent-based 10% ratio sampler, and on with every batch
// sampled, side by side: relay processes, each on its own slot and store,
// drain the same WAL at the same time (1,000-row transactions whose
// events all carry a producer's traceparent). Each iteration writes
// DELTABUS_BENCH_EVENTS events (default 200,000) and waits for every slot
// to confirm them; CPU is user + system time of each process
// (/proc/<pid>/stat) over the iteration. Metrics are not pushed, so the
// processes differ only by tracing. Two relays run with tracing off: the
// overhead of a traced relay is the median, over iterations, of its CPU
// over the mean of the two; their own difference ("control") is the noise
// of the comparison in the same run.
//
//	DELTABUS_BENCH_EVENTS=100000 go test -run '^$' -bench TracingOverhead -benchtime 8x ./tests/e2e
func BenchmarkTracingOverhead(b *testing.B) {
	events := envInt("DELTABUS_BENCH_EVENTS", 200_000)
	db := pgtest.NewDB(b)
	conn := db.Conn(b)
	if _, err := migrations.Apply(context.Background(), conn, migrations.Options{}); err != nil {
		b.Fatal(err)
	}
	rcv := otlptest.Start(b)
	variants := []struct {
		name string
		env  []string
	}{
		{"off", []string{"OTEL_TRACES_EXPORTER=none"}},
		{"control", []string{"OTEL_TRACES_EXPORTER=none"}},
		{"on10", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL, "OTEL_TRACES_SAMPLER=parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG=0.1"}},
		{"on100", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL, "OTEL_TRACES_SAMPLER=parentbased_always_on"}},
	}
	bin := buildBinary(b, "cmd/relay")
	procs := make([]*relayProc, len(variants))
	for i, v := range variants {
		env := append([]string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=file://" + b.TempDir(), "OTEL_METRICS_EXPORTER=none"}, v.env...)
		procs[i] = startProc(b, bin, env, "run", "--metrics-addr", "", "--slot", "bench_"+v.name, "--maintenance", "0")
	}
	for i, v := range variants {
		waitStreaming(b, procs[i], v.name)
	}
	load := func(n int) {
		for done := 0; done < n; done += 1000 {
			db.Exec(b, `INSERT INTO outbox (topic, key, type, payload, headers)
				SELECT 'bench-' || (i % 5), 'k' || i, 'Happened', jsonb_build_object('n', i, 'note', repeat('x', 120)),
				       jsonb_build_object('traceparent', '00-' || md5(i::text) || '-' || left(md5((-i)::text), 16) || '-01', 'tenant', 't' || (i % 7))
				FROM generate_series($1::int, $1::int + 999) i`, done)
		}
		for _, v := range variants {
			waitSlotConfirmed(b, conn, "bench_"+v.name, 3*time.Minute)
		}
	}
	load(20_000) // warm-up: tables created, pools filled
	total := make([]time.Duration, len(variants))
	ratios := make([][]float64, len(variants)) // per iteration, CPU over the mean of the two untraced relays
	b.ResetTimer()
	for range b.N {
		before := make([]time.Duration, len(variants))
		for i := range variants {
			before[i] = procCPU(b, procs[i])
		}
		load(events)
		used := make([]float64, len(variants))
		for i := range variants {
			d := procCPU(b, procs[i]) - before[i]
			total[i] += d
			used[i] = d.Seconds()
		}
		base := (used[0] + used[1]) / 2
		for i := range variants {
			ratios[i] = append(ratios[i], used[i]/base)
		}
	}
	b.StopTimer()
	for i, v := range variants {
		b.ReportMetric(float64(total[i].Microseconds())/float64(b.N*events), "cpu-us/event-"+v.name)
	}
	// The control's difference from the other untraced relay is the noise
	// of the comparison; the traced ones are compared with both.
	b.ReportMetric(100*(bench.Median(ratios[1])/bench.Median(ratios[0])-1), "noise-%-control")
	b.ReportMetric(100*(bench.Median(ratios[2])-1), "overhead-%-on10")
	b.ReportMetric(100*(bench.Median(ratios[3])-1), "overhead-%-on100")
	b.ReportMetric(0, "ns/op")
	if len(rcv.Spans()) == 0 && b.N*events >= 100_000 {
		b.Errorf("the traced relays exported no span")
	}
}

func waitStreaming(tb testing.TB, p *relayProc, name string) {
	tb.Helper()
	for deadline := time.Now().Add(time.Minute); !strings.Contains(p.output(), "msg=streaming"); time.Sleep(50 * time.Millisecond) {
		if done, err := p.exited(); done || time.Now().After(deadline) {
			tb.Fatalf("relay %s not streaming (exited %t: %v)\n%s", name, done, err, p.tail())
		}
	}
}

// waitSlotConfirmed waits until slot confirmed the current WAL insert
// position.
func waitSlotConfirmed(tb testing.TB, conn *pgx.Conn, slot string, limit time.Duration) {
	tb.Helper()
	ctx := context.Background()
	var target string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&target); err != nil {
		tb.Fatal(err)
	}
	for deadline := time.Now().Add(limit); ; time.Sleep(20 * time.Millisecond) {
		var ok bool
		err := conn.QueryRow(ctx, `SELECT coalesce(confirmed_flush_lsn >= $1::pg_lsn, false) FROM pg_replication_slots WHERE slot_name = $2`, target, slot).Scan(&ok)
		if err != nil {
			tb.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("slot %s did not confirm %s within %s", slot, target, limit)
		}
	}
}

// procCPU is the user + system CPU time the process used so far.
func procCPU(tb testing.TB, p *relayProc) time.Duration {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		tb.Fatal(err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// fields[0] is the state (field 3 of stat): utime and stime are fields 14, 15.
	ut, err1 := strconv.ParseInt(fields[11], 10, 64)
	st, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		tb.Fatalf("parse /proc stat %q", s)
	}
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / ticks
}
