package demo

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
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

// TestDemoWithATopicGroup: topics of a group the store holds share its
// table; the progress counts each table's rows once (produced and relayed
// agree after the drain), the verification reads each grouped topic's
// rows from the group's table, and the summary names the table and how to
// tail one grouped topic.
func TestDemoWithATopicGroup(t *testing.T) {
	db := pgtest.NewDB(t)
	dir := t.TempDir()
	root, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	g := catalog.Group{Name: "ops", Topics: []string{"ingestion.*", "data.*"}, Created: time.Now()}
	if err := catalog.WriteGroup(context.Background(), root, g); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := Run(ctx, &out, Options{Source: db.DSN, Dir: dir, Events: 2000, Rate: 1000}); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	var last []string
	for _, l := range strings.Split(out.String(), "\n") {
		if m := progressLine.FindStringSubmatch(l); m != nil {
			last = m
		}
	}
	if last == nil || last[1] != last[2] || !strings.Contains(out.String(), "verified: "+last[1]+" source rows") {
		t.Fatalf("last progress line %q: want produced = relayed, all verified:\n%s", last, out.String())
	}
	for _, want := range []string{`(?m)^ingestion\.orchestration +_group\.ops +\d+ +\d+$`, `(?m)^data\.quality +_group\.ops +\d+ +\d+$`,
		`(?m)^agent\.messages +agent\.messages +\d+ +\d+$`, `tail --store file://` + regexp.QuoteMeta(dir) + ` --topic (agent|data|ingestion)`} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("summary lacks %s:\n%s", want, out.String())
		}
	}
	if _, err := os.Stat(dir + "/ingestion.orchestration"); !os.IsNotExist(err) {
		t.Errorf("a grouped topic has a table of its own: %v", err)
	}
}
