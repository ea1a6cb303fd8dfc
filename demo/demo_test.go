package demo

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/tests/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

var progressLine = regexp.MustCompile(`^produced +(\d+) \(.*\) +relayed +(\d+) +behind +(\d+)$`)

// TestProgressCountsTheSameRows: the progress line's produced and relayed
// count the same rows, so relayed never exceeds produced, and once the
// relay has caught up they are equal, poison rows (which land in
// _dead_letter) included. Before, produced counted events reserved before
// their commit and no poison rows, and relayed every table's rows: a
// finished demo showed more relayed than produced.
func TestProgressCountsTheSameRows(t *testing.T) {
	db := pgtest.NewDB(t)
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := Run(ctx, &out, Options{Source: db.DSN, Dir: t.TempDir(), Events: 3000, Rate: 1000, poisonEvery: 4})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	var last []string
	for _, l := range strings.Split(out.String(), "\n") {
		if m := progressLine.FindStringSubmatch(l); m != nil {
			last = m
			if p, r := atoi(t, m[1]), atoi(t, m[2]); r > p {
				t.Errorf("progress line %q: more relayed than produced", l)
			}
		}
	}
	if last == nil {
		t.Fatalf("no progress line in:\n%s", out.String())
	}
	produced, relayed := atoi(t, last[1]), atoi(t, last[2])
	if produced != relayed || last[3] != "0" {
		t.Fatalf("last progress line after the drain: produced %d, relayed %d, behind %s; want equal counts\n%s", produced, relayed, last[3], out.String())
	}
	if produced <= 3000 {
		t.Fatalf("produced %d rows for 3000 events with a poison row every 4 transactions: poison rows not counted\n%s", produced, out.String())
	}
	if !strings.Contains(out.String(), "verified: "+last[1]+" source rows") {
		t.Fatalf("the verification does not report the %s rows produced:\n%s", last[1], out.String())
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
