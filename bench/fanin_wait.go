package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
)

// The fan-in run's waits and readings of its sources and stores.

// appIDOf is the appId the relay of dsn's "deltabus" slot commits with.
func appIDOf(ctx context.Context, dsn string) (string, error) {
	var src catalog.Source
	err := queryRow(ctx, dsn, `SELECT system_identifier::text, current_database() FROM pg_control_system()`, &src.SystemID, &src.Database)
	src.Slot = "deltabus"
	return src.AppID(), err
}

func queryRow(ctx context.Context, dsn, sql string, dest ...any) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, sql).Scan(dest...)
}

// waitMarkers waits until the store holds n relay markers.
func waitMarkers(ctx context.Context, url string, n int) error {
	st, err := storage.Open(ctx, url, storage.S3Options{})
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if markers, err := catalog.ListMarkers(ctx, st); err == nil && len(markers) >= n {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("store %s: relay did not finish its first start (%d markers wanted)", url, n)
		}
	}
}

// waitConfirmedAt polls every `every` until the slot confirmed end.
func waitConfirmedAt(ctx context.Context, dsn, end string, every time.Duration) error {
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(every) {
		ok, err := confirmed(ctx, dsn, "deltabus", end)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("relay did not confirm %s within 5 minutes", end)
}

// scrapeRaces reads deltabus_commit_races_total and
// deltabus_delta_commits_total (summed over topics) from a relay's /metrics.
func scrapeRaces(ctx context.Context, addr string) (races, commits int, err error) {
	body, err := scrape(ctx, addr)
	if err != nil {
		return 0, 0, err
	}
	text := string(body)
	return int(metricSum(text, "deltabus_commit_races_total")), int(metricSum(text, "deltabus_delta_commits_total")), nil
}

// metricSum sums every sample of one metric in Prometheus text format.
func metricSum(text, name string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(f[0], &v); err == nil {
			sum += v
		}
	}
	return sum
}

// forEach runs fn(0..n-1) at once and returns the first error.
func forEach(n int, fn func(int) error) error {
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- fn(i) }()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}
