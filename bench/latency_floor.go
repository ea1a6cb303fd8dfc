package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/deltabus/deltabus/verify"
)

// DeliveryFloor is what pg_recvlogical sees of the latency run's load,
// run in turn with the relay: the time from each source commit to its
// arrival at the client, before anything is written anywhere. It is the
// machine's own limit for the relay's latency, which adds its durable
// commit to it.
type DeliveryFloor struct {
	Events int     `json:"events"`
	P50Ms  float64 `json:"p50Ms"`
	P99Ms  float64 `json:"p99Ms"`
}

// recvlogicalLatency puts the latency run's load (o.Rate single-row
// transactions a second for o.LatencyFor, committed durably by the same
// producers) on a fresh database while pg_recvlogical streams it from a
// test_decoding slot to a pipe, and returns each transaction's delivery
// latency: the moment its COMMIT line is read minus the commit time the
// line carries (the commit record's, as the relay's figure uses).
// test_decoding rather than pgoutput because its output is lines one can
// time; the walsender's work per row is the same decoding.
func (b *bench) recvlogicalLatency(ctx context.Context) ([]time.Duration, error) {
	dsn, drop, err := b.freshDB(ctx)
	if err != nil {
		return nil, err
	}
	defer drop()
	if err := execSQL(ctx, dsn, `SELECT pg_create_logical_replication_slot('ref_latency', 'test_decoding')`); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(rctx, b.o.RecvlogicalBin, "-d", dsn+"&options=-c%20TimeZone%3DUTC", "-S", "ref_latency", "--start",
		"-o", "include-timestamp=1", "-o", "skip-empty-xacts=1", "-f", "-")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second // then killed
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("pg_recvlogical: %w", err)
	}
	n := b.latencyEvents()
	got := make(chan deliveries, 1)
	go func() { got <- readCommits(out, n) }()
	if err := b.latencyLoad(ctx, dsn, n); err != nil {
		return nil, err
	}
	rows, err := outboxRows(ctx, dsn)
	if err != nil {
		return nil, err
	}
	var d deliveries
	select {
	case d = <-got:
	case <-time.After(time.Minute):
		cancel() // pg_recvlogical ends, and the reader at its output's end
		select {
		case d = <-got: // what it did deliver, for the error below
		case <-time.After(10 * time.Second):
		}
	}
	cancel()
	_ = cmd.Wait()
	switch {
	case d.err != nil:
		return nil, fmt.Errorf("pg_recvlogical: %w (%s)", d.err, strings.TrimSpace(stderr.String()))
	case len(d.lat) < rows:
		return nil, fmt.Errorf("pg_recvlogical delivered %d of %d transactions within a minute (%s)", len(d.lat), rows, strings.TrimSpace(stderr.String()))
	}
	return d.lat, nil
}

type deliveries struct {
	lat []time.Duration
	err error
}

// readCommits reads test_decoding lines until n COMMIT lines have come or
// the stream ends, timing each COMMIT as it is read.
func readCommits(r io.Reader, n int) deliveries {
	var d deliveries
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for len(d.lat) < n && sc.Scan() {
		now := time.Now()
		at, ok, err := commitTime(sc.Text())
		if err != nil {
			d.err = err
			return d
		}
		if ok {
			d.lat = append(d.lat, now.Sub(at))
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		d.err = err
	}
	return d
}

// commitTime parses the commit time of a test_decoding COMMIT line with
// include-timestamp ("COMMIT 750 (at 2026-12-05 17:02:43.123456+00)");
// ok is false for any other line.
func commitTime(line string) (time.Time, bool, error) {
	if !strings.HasPrefix(line, "COMMIT ") {
		return time.Time{}, false, nil
	}
	_, ts, found := strings.Cut(line, "(at ")
	if !found || !strings.HasSuffix(ts, ")") {
		return time.Time{}, false, fmt.Errorf("a COMMIT line without its time: %q (include-timestamp)", line)
	}
	at, err := time.Parse("2006-01-02 15:04:05.999999-07", strings.TrimSuffix(ts, ")"))
	if err != nil {
		return time.Time{}, false, fmt.Errorf("COMMIT line %q: %w", line, err)
	}
	return at, true, nil
}

// deliveryFloor summarises recvlogicalLatency's figures.
func deliveryFloor(lat []time.Duration) DeliveryFloor {
	return DeliveryFloor{Events: len(lat), P50Ms: ms(verify.Percentile(lat, 50)), P99Ms: ms(verify.Percentile(lat, 99))}
}
