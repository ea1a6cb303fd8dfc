package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/deltabus/deltabus/bench/visible"
	"github.com/deltabus/deltabus/pgcluster"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/verify"
)

// fanin: several PostgreSQL clusters, one relay each on default settings
// (the same slot name, the same five topic names), committing into one
// shared store, against the same relays each into a store of its own, in
// the same run (`relay bench --only fanin`). For each count of sources
// (Options.FaninSources, "2,4"):
//
//   - drain: each source's outbox gets Options.FaninEvents single-row
//     transactions while its relay is stopped; then every relay starts at
//     once and the figure is all sources' events over the time until the
//     last slot confirmed its end. Options.Rounds rounds, separate stores
//     and shared in turn, which goes first alternating; the ratio is the
//     median of the rounds'.
//   - steady: every source commits Options.FaninRate single-row
//     transactions per second for Options.FaninFor with its relay running;
//     the p99 source-commit-to-Delta latency of each source in the shared
//     store against that of one source alone (run once, before the counts).
//     The same load into separate stores is also measured, so that what
//     sharing costs is told apart from what n times the load costs on
//     this machine.
//
// Lost races are what the relays count (deltabus_commit_races_total,
// scraped from each relay's /metrics before it stops) per 1,000 topic
// commits (deltabus_delta_commits_total).
func (b *bench) fanin(ctx context.Context) error {
	counts, err := parseCounts(b.o.FaninSources)
	if err != nil {
		return err
	}
	nmax := slices.Max(counts)
	srvs := make([]*pgcluster.Server, 0, nmax)
	defer func() {
		for _, s := range srvs {
			s.Stop()
		}
	}()
	for range nmax {
		s, err := pgcluster.StartServer(ctx, "max_wal_size = 4GB", "checkpoint_timeout = 30min")
		if err != nil {
			return err
		}
		srvs = append(srvs, s)
	}
	base, cleanup, err := b.faninBase()
	if err != nil {
		return err
	}
	defer cleanup()
	name := "fanin"
	if b.o.FaninName != "" {
		name = b.o.FaninName
	}
	fmt.Fprintf(b.out, "# %s: %d PostgreSQL 15 clusters (pgcluster defaults, producers synchronous_commit=on), one relay each on default settings%s, 5 topics, store %s\n",
		name, nmax, relayArgsNote(b.o.RelayArgs), base)
	f := &faninRun{b: b, srvs: srvs, base: base}
	single, err := f.steady(ctx, 1, false)
	if err != nil {
		return fmt.Errorf("single source: %w", err)
	}
	singleP99 := ms(verify.Percentile(single.lat[0], 99))
	fmt.Fprintf(b.out, "# %s single source: %d events at %.0f/s, p99 %.0f ms (latency to the moment a commit's log entry got its name; %d commits not seen, timed by their ctime)\n",
		name, len(single.lat[0]), single.achieved, singleP99, single.unseen)
	for _, n := range counts {
		r := FaninResult{Name: fmt.Sprintf("%s_%d", name, n), Store: base, Sources: n, Topics: 5,
			Events: b.o.FaninEvents, Rate: b.o.FaninRate, Seconds: b.o.FaninFor.Seconds(), SingleP99: singleP99}
		sep, shr, err := f.drains(ctx, n, &r)
		if err != nil {
			return err
		}
		ssep, err := f.steady(ctx, n, false)
		if err != nil {
			return fmt.Errorf("%d sources steady, separate stores: %w", n, err)
		}
		sshr, err := f.steady(ctx, n, true)
		if err != nil {
			return fmt.Errorf("%d sources steady, one store: %w", n, err)
		}
		r.SteadyRaces, r.SteadyCommits = sshr.races, sshr.commits
		fmt.Fprintf(b.out, "# %s %d sources steady: commits not seen appear, timed by their ctime: %d (separate stores), %d (one store)\n", name, n, ssep.unseen, sshr.unseen)
		for i := range n {
			r.SharedP99 = append(r.SharedP99, ms(verify.Percentile(sshr.lat[i], 99)))
			r.SeparateP99 = append(r.SeparateP99, ms(verify.Percentile(ssep.lat[i], 99)))
			r.SharedEvents += len(sshr.lat[i])
		}
		b.res.Fanin = append(b.res.Fanin, r)
		b.faninLines(r, sep, shr, ssep, sshr)
	}
	return nil
}

// drains times the drain Options.Rounds times, separate stores and one
// store in turn, which goes first alternating; the figures are the
// medians (the ratio the median of the rounds' ratios), races summed.
func (f *faninRun) drains(ctx context.Context, n int, r *FaninResult) (sep, shr faninOutcome, err error) {
	var seps, shrs []float64
	for round := range max(f.b.o.Rounds, 1) {
		var s, h faninOutcome
		order := []bool{false, true}
		if round%2 == 1 {
			order = []bool{true, false}
		}
		for _, shared := range order {
			o, err := f.drain(ctx, n, shared)
			if err != nil {
				return sep, shr, fmt.Errorf("%d sources, shared=%v, round %d: %w", n, shared, round+1, err)
			}
			if shared {
				h = o
			} else {
				s = o
			}
		}
		seps, shrs = append(seps, s.eps), append(shrs, h.eps)
		r.Rounds = append(r.Rounds, h.eps/s.eps)
		sep.races, sep.commits = sep.races+s.races, sep.commits+s.commits
		shr.races, shr.commits = shr.races+h.races, shr.commits+h.commits
		sep.secs, shr.secs = sep.secs+s.secs, shr.secs+h.secs
	}
	sep.eps, shr.eps = Median(seps), Median(shrs)
	r.SeparateEventsPerSec, r.SharedEventsPerSec, r.Ratio = sep.eps, shr.eps, Median(r.Rounds)
	r.DrainRaces, r.DrainCommits = shr.races, shr.commits
	return sep, shr, nil
}

func (b *bench) faninLines(r FaninResult, sep, shr, ssep, sshr faninOutcome) {
	fmt.Fprintf(b.out, "# %s drain: %d sources × %d single-row tx, %d rounds: one store %.2fs, separate stores %.2fs in all; steady: %d sources × %d tx/s for %v (achieved %.0f/s per source shared, %.0f/s separate)\n",
		r.Name, r.Sources, r.Events, len(r.Rounds), shr.secs, sep.secs, r.Sources, r.Rate, b.o.FaninFor, sshr.achieved, ssep.achieved)
	fmt.Fprintf(b.out, "%s_events_per_s relay=%.0fev/s reference=%.0fev/s ratio=%.2f # median of rounds: %s\n",
		r.Name, r.SharedEventsPerSec, r.SeparateEventsPerSec, r.Ratio, joinRatios(r.Rounds))
	fmt.Fprintf(b.out, "%s_drain_races_per_1000_commits relay=%.1f reference=%.1f(separate) ratio=- # %d races in %d commits\n",
		r.Name, per1000(shr.races, shr.commits), per1000(sep.races, sep.commits), shr.races, shr.commits)
	fmt.Fprintf(b.out, "%s_steady_races_per_1000_commits relay=%.1f reference=%.1f(separate) ratio=- # %d races in %d commits\n",
		r.Name, per1000(sshr.races, sshr.commits), per1000(ssep.races, ssep.commits), sshr.races, sshr.commits)
	for i := range r.Sources {
		b.linef(fmt.Sprintf("%s_p99_source%d", r.Name, i+1), r.SharedP99[i], r.SingleP99, "ms")
	}
	fmt.Fprintf(b.out, "# %s p99 per source, separate stores (same load, nothing shared): %s ms\n", r.Name, joinMs(r.SeparateP99))
}

func per1000(races, commits int) float64 {
	if commits == 0 {
		return 0
	}
	return float64(races) * 1000 / float64(commits)
}

func joinMs(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(s, ", ")
}

func relayArgsNote(args string) string {
	if args == "" {
		return ""
	}
	return " plus " + args
}

func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err != nil || n < 1 || n > 16 {
			return nil, fmt.Errorf("--fanin-sources %q: want counts of sources from 1 to 16, comma-separated (e.g. 2,4)", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// faninBase is the store URL every fan-in store goes under: Options.FaninStore
// (s3://bucket/prefix) or a temp dir removed at the end.
func (b *bench) faninBase() (string, func(), error) {
	if b.o.FaninStore != "" {
		return strings.TrimSuffix(b.o.FaninStore, "/") + fmt.Sprintf("/fanin-%d", time.Now().Unix()), func() {}, nil
	}
	dir := b.storeDir("fanin")
	return "file://" + dir, func() { os.RemoveAll(dir) }, nil
}

// faninRun holds the clusters of one fan-in measurement.
type faninRun struct {
	b    *bench
	srvs []*pgcluster.Server
	base string
	k    int // stores made so far
}

// faninOutcome is one mode (shared or separate) of one count of sources.
type faninOutcome struct {
	secs, eps, achieved float64
	races, commits      int
	unseen              int               // commits the watch did not see appear (commitLatenciesBy)
	lat                 [][]time.Duration // per source (steady runs)
}

// faninSource is one source of one mode: its fresh database, store and
// relay process.
type faninSource struct {
	dsn, store, metrics string
	drop                func()
	proc                *exec.Cmd
}

// setup makes a fresh database on each of the first n clusters and the
// stores: one for all (shared) or one each; each relay's first start is
// done before it returns (in turn, so that each marker is waited for).
func (f *faninRun) setup(ctx context.Context, n int, shared bool) ([]*faninSource, func(), error) {
	srcs := make([]*faninSource, 0, n)
	done := func() {
		for _, s := range srcs {
			if s.proc != nil {
				_ = s.proc.Process.Kill()
				_ = s.proc.Wait()
			}
			s.drop()
		}
	}
	f.k++
	mode := "separate"
	if shared {
		mode = "shared"
	}
	for i := range n {
		b := &bench{admin: f.srvs[i].DSN("postgres"), self: f.b.self, out: f.b.out, o: f.b.o, res: f.b.res}
		dsn, drop, err := b.freshDB(ctx)
		if err != nil {
			done()
			return nil, nil, err
		}
		s := &faninSource{dsn: dsn, drop: drop, store: fmt.Sprintf("%s/%d-%s-%d", f.base, f.k, mode, n)}
		if !shared {
			s.store += fmt.Sprintf("/source%d", i+1)
		}
		srcs = append(srcs, s)
		want := 1
		if shared {
			want = i + 1
		}
		if err := f.start(s, nil); err != nil {
			done()
			return nil, nil, err
		}
		if err := waitSlot(ctx, dsn, "deltabus", true, time.Minute); err != nil {
			done()
			return nil, nil, err
		}
		if err := waitMarkers(ctx, s.store, want); err != nil {
			done()
			return nil, nil, err
		}
	}
	return srcs, done, nil
}

// start starts s's relay with its metrics on a free port.
func (f *faninRun) start(s *faninSource, extra []string) error {
	port, err := pgcluster.FreePort()
	if err != nil {
		return err
	}
	s.metrics = fmt.Sprintf("127.0.0.1:%d", port)
	p, err := f.b.startRelay(s.dsn, s.store, "deltabus", nil, append([]string{"--metrics-addr", s.metrics}, extra...)...)
	if err != nil {
		return err
	}
	s.proc = p
	return nil
}

// stop scrapes s's relay's counters, then stops it with SIGTERM.
func (f *faninRun) stop(ctx context.Context, s *faninSource) (races, commits int, err error) {
	races, commits, err = scrapeRaces(ctx, s.metrics)
	_ = s.proc.Process.Signal(syscall.SIGTERM)
	_ = s.proc.Wait()
	s.proc = nil
	return races, commits, err
}

// drain times n relays, started at once, through a backlog of
// Options.FaninEvents single-row transactions each.
func (f *faninRun) drain(ctx context.Context, n int, shared bool) (faninOutcome, error) {
	srcs, done, err := f.setup(ctx, n, shared)
	if err != nil {
		return faninOutcome{}, err
	}
	defer done()
	for _, s := range srcs {
		_ = s.proc.Process.Signal(syscall.SIGTERM)
		_ = s.proc.Wait()
		s.proc = nil
		if err := waitSlot(ctx, s.dsn, "deltabus", false, time.Minute); err != nil {
			return faninOutcome{}, err
		}
	}
	ends := make([]string, n)
	if err := forEach(n, func(i int) error {
		if err := loadSingle(ctx, srcs[i].dsn, f.b.o.FaninEvents, 4, 0, 0); err != nil {
			return err
		}
		ends[i], err = walInsertLSN(ctx, srcs[i].dsn)
		return err
	}); err != nil {
		return faninOutcome{}, err
	}
	t0 := time.Now()
	for _, s := range srcs {
		if err := f.start(s, nil); err != nil {
			return faninOutcome{}, err
		}
	}
	if err := forEach(n, func(i int) error { return waitConfirmedAt(ctx, srcs[i].dsn, ends[i], 100*time.Millisecond) }); err != nil {
		return faninOutcome{}, err
	}
	out := faninOutcome{secs: time.Since(t0).Seconds()}
	out.eps = float64(n*f.b.o.FaninEvents) / out.secs
	for _, s := range srcs {
		r, c, err := f.stop(ctx, s)
		if err != nil {
			return out, err
		}
		out.races, out.commits = out.races+r, out.commits+c
	}
	return out, nil
}

// steady runs n relays while each source commits Options.FaninRate
// single-row transactions per second, and reads each source's latencies
// from the store(s).
func (f *faninRun) steady(ctx context.Context, n int, shared bool) (faninOutcome, error) {
	srcs, done, err := f.setup(ctx, n, shared)
	if err != nil {
		return faninOutcome{}, err
	}
	defer done()
	stores := []string{srcs[0].store}
	if !shared {
		stores = stores[:0]
		for _, s := range srcs {
			stores = append(stores, s.store)
		}
	}
	vis := f.b.watchStores(stores)
	defer stopWatches(vis)
	time.Sleep(2 * time.Second) // steady state: past the first starts' own commits
	o := f.b.o
	total := int(float64(o.FaninRate) * o.FaninFor.Seconds())
	ends := make([]string, n)
	rates := make([]float64, n)
	if err := forEach(n, func(i int) error {
		t0 := time.Now()
		durable := srcs[i].dsn + "&options=-c%20synchronous_commit%3Don"
		if err := loadSingle(ctx, durable, total, 8, o.FaninRate, o.FaninFor+5*time.Second); err != nil {
			return err
		}
		rates[i] = float64(total) / time.Since(t0).Seconds()
		var err error
		ends[i], err = walInsertLSN(ctx, srcs[i].dsn)
		return err
	}); err != nil {
		return faninOutcome{}, err
	}
	out := faninOutcome{achieved: slices.Min(rates)}
	if err := forEach(n, func(i int) error { return waitConfirmedAt(ctx, srcs[i].dsn, ends[i], 100*time.Millisecond) }); err != nil {
		return out, err
	}
	for _, s := range srcs {
		r, c, err := f.stop(ctx, s)
		if err != nil {
			return out, err
		}
		out.races, out.commits = out.races+r, out.commits+c
	}
	f.b.endWatches(vis)
	out.lat, out.unseen, err = sourceLatencies(ctx, srcs, stores, vis, total)
	return out, err
}

// sourceLatencies reads every event's latency from the stores (watched by
// vis, commitLatenciesBy), per source in the order srcs were set up, each
// of which must have at least total events; and how many commits the
// watches did not see appear.
func sourceLatencies(ctx context.Context, srcs []*faninSource, stores []string, vis []*visible.Watcher, total int) ([][]time.Duration, int, error) {
	byApp, unseenAll := map[string][]time.Duration{}, 0
	for i, url := range stores {
		st, err := storage.Open(ctx, url, storage.S3Options{})
		if err != nil {
			return nil, 0, err
		}
		unseen, err := commitLatenciesBy(ctx, st, vis[i], func(app string, d time.Duration) { byApp[app] = append(byApp[app], d) })
		if err != nil {
			return nil, 0, err
		}
		unseenAll += unseen
	}
	var lat [][]time.Duration
	for _, s := range srcs { // their markers' appIds
		app, err := appIDOf(ctx, s.dsn)
		if err != nil {
			return nil, 0, err
		}
		if len(byApp[app]) < total {
			return nil, 0, fmt.Errorf("source %s: %d events in the store, want %d", app, len(byApp[app]), total)
		}
		lat = append(lat, byApp[app])
	}
	return lat, unseenAll, nil
}
