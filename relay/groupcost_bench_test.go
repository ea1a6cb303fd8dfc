package relay

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
)

const (
	groupCostTopics = 100 // topics of the load, each Poisson at 1 event/s
	groupCostName   = "iot"
)

// BenchmarkGroupCost runs 100 topics (iot.t000..iot.t099), each with
// Poisson arrivals of single-row transactions at 1 event/s, through a
// session into Delta tables on S3 (versitygw), with the requests counted
// at the store as in BenchmarkTopicCost (issue 30 item 2: p99 ≤ 1 s and
// ≤ $15 a month for all of them). The cells put the topics in one group
// (catalog.WriteGroup before the session starts) whose commit interval is
// unset (the relay's, at its S3 default of 1 s), 900ms or 2s; and, as the
// reference in the same run, leave each topic in a table of its own at
// the S3 default. Every figure is for all 100 topics together: p50/p99
// latency (event sent to acknowledged), PUTs/s and GETs/s, commits/s and
// PUTs per commit (commits = versions the tables gained), $/month.
// DELTABUS_COST_SECONDS sets each cell's length (default 15).
func BenchmarkGroupCost(b *testing.B) {
	d := costDuration()
	topics := make([]string, groupCostTopics)
	for i := range topics {
		topics[i] = fmt.Sprintf("%s.t%03d", groupCostName, i)
	}
	for _, cell := range []struct {
		name     string
		grouped  bool
		interval string // the group's commit interval; "" = the relay's
	}{
		{"group/interval=default", true, ""},
		{"group/interval=900ms", true, "900ms"},
		{"group/interval=2s", true, "2s"},
		{"own-tables/interval=default", false, ""},
	} {
		b.Run(fmt.Sprintf("%s/topics=%d", cell.name, len(topics)), func(b *testing.B) {
			for b.Loop() {
				var r costRun
				if cell.grouped {
					r = runGroupCost(b, topics, cell.interval, d)
				} else {
					r = measureCost(b, 0, newPacedConn(len(topics), topics...), d, nil, topics...)
				}
				reportGroupCost(b, r)
			}
		})
	}
}

// runGroupCost runs the topics as one group whose commit interval is
// interval ("" = unset), and checks that they were placed in its table.
func runGroupCost(b *testing.B, topics []string, interval string, d time.Duration) costRun {
	var store storage.Store
	g := catalog.Group{Name: groupCostName, Topics: []string{groupCostName + ".*"}, CommitInterval: interval, Created: time.Now()}
	prepare := func(ctx context.Context, s storage.Store) error {
		store = s
		return catalog.WriteGroup(ctx, s, g)
	}
	table := catalog.GroupTable(g.Name)
	r := measureCost(b, 0, newPacedConn(len(topics), topics...), d, prepare, table)
	for _, t := range []string{topics[0], topics[len(topics)-1]} {
		p, err := catalog.Locate(context.Background(), store, t)
		if err != nil {
			b.Fatal(err)
		}
		if !p.Registered || p.Table != table {
			b.Fatalf("topic %s is in table %q (registered %v), want the group's %q", t, p.Table, p.Registered, table)
		}
	}
	return r
}

func reportGroupCost(b *testing.B, r costRun) {
	if r.commits <= 0 || len(r.lat) == 0 {
		b.Fatalf("%d commits and %d events acknowledged in the steady state", r.commits, len(r.lat))
	}
	b.ReportMetric(float64(pct(r.lat, 50).Milliseconds()), "p50-ms")
	b.ReportMetric(float64(pct(r.lat, 99).Milliseconds()), "p99-ms")
	b.ReportMetric(r.perSec(r.puts), "PUT/s")
	b.ReportMetric(r.perSec(r.gets), "GET/s")
	b.ReportMetric(r.perSec(r.commits), "commit/s")
	b.ReportMetric(float64(r.puts)/float64(r.commits), "PUT/commit")
	b.ReportMetric(r.monthly(), "$/month")
	b.ReportMetric(0, "ns/op")
}

// commitKey is a Delta commit file's name.
var commitKey = regexp.MustCompile(`/_delta_log/\d{20}\.json$`)

// countVersions counts the commit files of the tables (folders under the
// store root), listing the store directly.
func countVersions(b *testing.B, store storage.Store, tables []string) int {
	n := 0
	for _, t := range tables {
		objs, err := store.List(context.Background(), t+"/_delta_log/", "")
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range objs {
			if commitKey.MatchString(o.Key) {
				n++
			}
		}
	}
	return n
}
