package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/metricstest"
	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/deltabus/deltabus/verify"
)

// haCluster is a primary streaming to an asynchronous hot standby, and the
// one connection string that HA set-ups give applications: both hosts,
// target_session_attrs=read-write, so whichever is primary is reached.
type haCluster struct {
	primary, standby *pgtest.Server
	dsn              string
}

// newHACluster starts a primary of the default major version (0) or of
// major, and its standby. With syncSlots (PostgreSQL 17 and later) the
// standby synchronises failover slots and the primary sends logical
// changes only once the standby has them (synchronized_standby_slots).
func newHACluster(t *testing.T, major int, syncSlots bool) *haCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var primary *pgtest.Server
	if major == 0 {
		primary = pgtest.NewServer(t)
	} else {
		primary = pgtest.NewServerVersion(t, major)
	}
	conn, err := pgx.Connect(ctx, primary.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	migrate(t, conn)
	standby, err := primary.NewStandby(ctx, pgtest.StandbyOptions{SyncSlots: syncSlots})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(standby.Stop)
	if syncSlots {
		for _, q := range []string{"ALTER SYSTEM SET synchronized_standby_slots = 'standby1'", "SELECT pg_reload_conf()"} {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
	}
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=5",
		primary.Port, standby.Port)
	return &haCluster{primary: primary, standby: standby, dsn: dsn}
}

// waitConfirmedPast waits until the relay's slot on the primary confirmed
// an LSN past lsn: the relay has published (and acknowledged) events the
// standby never received.
func waitConfirmedPast(t *testing.T, dsn string, lsn pglogrepl.LSN) {
	t.Helper()
	waitTrue(t, dsn, time.Minute, "the relay confirmed past "+lsn.String(),
		`SELECT coalesce(bool_or(confirmed_flush_lsn > $1::pg_lsn), false) FROM pg_replication_slots WHERE slot_name = 'deltabus'`, lsn.String())
}

// waitTrue polls a query of one boolean on dsn until it is true.
func waitTrue(t *testing.T, dsn string, limit time.Duration, what, query string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	eventually(t, limit, what, func() bool {
		var ok bool
		if err := conn.QueryRow(ctx, query, args...).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	})
}

// failoverSlotMajors returns the installed majors that synchronise
// failover slots (17 and later); none fails the test.
func failoverSlotMajors(t *testing.T) []int {
	t.Helper()
	var majors []int
	for _, m := range pgtest.Versions(t) {
		if m >= 17 {
			majors = append(majors, m)
		}
	}
	if len(majors) == 0 {
		t.Fatal("no PostgreSQL 17 or later installed: run `bash scripts/deps.sh pgversions`")
	}
	return majors
}

// waitExit waits for the relay to exit by itself and returns its log.
func waitExit(t *testing.T, p *relayProc, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if done, _ := p.exited(); done {
			return p.output()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the relay did not exit within %v:\n%s", within, p.tail())
	return ""
}

// TestFailoverToLaggingStandby: the standby stops receiving while the relay
// goes on publishing from the primary; the primary is killed, the standby
// promoted, producers go on against it. The relay stops naming the
// recovery; after `relay bootstrap --recover` and a restart, every event of
// the new primary is in its topic exactly once and in commit order, and the
// events the old primary published past the fork (lost with it) are
// recorded as phantoms, named by `relay reconcile`.
func TestFailoverToLaggingStandby(t *testing.T) {
	ha := newHACluster(t, 0, false)
	url, store := localStore(t)
	env := []string{"DELTABUS_SOURCE=" + ha.dsn, "DELTABUS_STORE=" + url}
	p := startRelay(t, env)
	procs := []*relayProc{p}
	t.Cleanup(func() { logProblems(t, procs) })
	waitSlotActive(t, ha.primary.DSN("postgres"), "deltabus", p)

	ctx, stopProducers := context.WithCancel(context.Background())
	defer stopProducers()
	prod := producers{rate: 400}
	produced := make(chan struct{})
	go func() { prod.run(ctx, t, ha.dsn, 4, 1<<30); close(produced) }()
	time.Sleep(time.Second)

	received, err := ha.standby.StopReceiving(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fork, _ := pglogrepl.ParseLSN(received)
	waitConfirmedPast(t, ha.primary.DSN("postgres"), fork+64<<10)
	if err := ha.primary.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ha.standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("failover: the standby received up to %s; %d events written so far", received, prod.written.Load())
	out := waitExit(t, p, 2*time.Minute)
	if !strings.Contains(out, "relay bootstrap --recover") {
		t.Fatalf("the relay exited without naming the recovery:\n%s", p.tail())
	}
	code, stdout, stderr := runCLI(t, env, "bootstrap", "--recover")
	if code != 0 {
		t.Fatalf("bootstrap --recover: exit %d\n%s\n%s", code, stdout, stderr)
	}
	addr := freeAddr(t)
	p = startRelay(t, env, "--metrics-addr", addr)
	procs = append(procs, p)
	newPrimary := ha.standby.DSN("postgres")
	waitSlotActive(t, newPrimary, "deltabus", p)
	time.Sleep(2 * time.Second) // the new primary's transactions keep streaming
	stopProducers()
	<-produced
	waitDrained(t, newPrimary, "deltabus", 2*time.Minute)
	phantoms := checkFailedOver(t, newPrimary, store, true)
	checkPhantomsShown(t, env, addr, len(phantoms))
	checkPhantomsConsumed(t, env, store)
	// Beside the running relay, which confirms the WAL reconcile samples
	// (a stopped one leaves the server's later records unconfirmed).
	checkReconcileNames(t, env, phantoms)
	if err := p.stop(time.Minute); err != nil {
		t.Fatalf("relay did not stop: %v\n%s", err, p.tail())
	}
}

// checkPhantomsShown wants n phantoms in `relay status --json`, in the
// relay's /api/status (the operator's page) and in deltabus_phantom_events.
func checkPhantomsShown(t *testing.T, env []string, addr string, n int) {
	t.Helper()
	code, stdout, stderr := runCLI(t, env, "status", "--json", "--relay-addr", "")
	var st struct {
		Source    struct{ Timeline, MarkerTimeline uint32 }
		Failovers []struct{ Phantoms int }
		Resolved  *struct{ LSN, Position int64 }
	}
	if err := json.Unmarshal([]byte(stdout), &st); code != 0 || err != nil {
		t.Fatalf("relay status --json: exit %d, %v\n%s%s", code, err, stdout, stderr)
	}
	if len(st.Failovers) != 1 || st.Failovers[0].Phantoms != n || st.Source.Timeline != 2 || st.Source.MarkerTimeline != 2 {
		t.Fatalf("relay status: %+v, want one failover with %d phantoms, on timeline 2", st, n)
	}
	if st.Resolved == nil || st.Resolved.Position <= st.Resolved.LSN {
		t.Fatalf("relay status: resolved %+v, want a position lifted above its LSN by the failover's epoch", st.Resolved)
	}
	var page struct{ Failovers []struct{ Phantoms int } }
	getJSON(t, "http://"+addr+"/api/status", &page)
	if len(page.Failovers) != 1 || page.Failovers[0].Phantoms != n {
		t.Fatalf("/api/status failovers %+v, want one with %d phantoms", page.Failovers, n)
	}
	eventually(t, 30*time.Second, "deltabus_phantom_events", func() bool {
		mfs, err := metricstest.Scrape("http://" + addr + "/metrics")
		if err != nil || mfs["deltabus_phantom_events"] == nil {
			return false
		}
		total := 0.0
		for _, m := range mfs["deltabus_phantom_events"].GetMetric() {
			total += m.GetGauge().GetValue()
		}
		return int(total) == n
	})
}

// TestFailoverToCaughtUpStandby: a standby that had received everything
// the relay published: after the recovery nothing is lost, duplicated or
// phantom, and every command (rebuild, janitor, status, doctor) works with
// the HA DSN whose first host is gone. A slot made on the new primary after
// the promotion is refused, naming the recovery, which replaces it.
func TestFailoverToCaughtUpStandby(t *testing.T) {
	ha := newHACluster(t, 0, false)
	url, store := localStore(t)
	env := []string{"DELTABUS_SOURCE=" + ha.dsn, "DELTABUS_STORE=" + url}
	p := startRelay(t, env)
	waitSlotActive(t, ha.primary.DSN("postgres"), "deltabus", p)
	ctx := context.Background()
	prod := producers{rate: 400}
	prod.run(ctx, t, ha.dsn, 2, 600)
	waitDrained(t, ha.primary.DSN("postgres"), "deltabus", time.Minute)
	if err := ha.primary.WaitCaughtUp(ctx, ha.standby); err != nil {
		t.Fatal(err)
	}
	if err := ha.primary.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ha.standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if out := waitExit(t, p, 2*time.Minute); !strings.Contains(out, "relay bootstrap --recover") {
		t.Fatalf("the relay exited without naming the recovery:\n%s", p.tail())
	}
	// A slot someone made on the new primary after the promotion: the
	// transactions between the fork and its creation reached no slot, so
	// the relay refuses to stream from it, and the recovery replaces it.
	newPrimary := ha.standby.DSN("postgres")
	(&pgtest.DB{DSN: newPrimary}).Exec(t, "SELECT pg_create_logical_replication_slot('deltabus', 'pgoutput')")
	(&pgtest.DB{DSN: newPrimary}).Exec(t, `INSERT INTO outbox (topic, key, type, payload) VALUES ('orders', 'gap', 'Created', '{}')`)
	if code, _, stderr := runCLI(t, env, "run", "--metrics-addr", ""); code == 0 || !strings.Contains(stderr, "was created on timeline 2 after") || !strings.Contains(stderr, "relay bootstrap --recover") {
		t.Fatalf("relay run on a slot made after the promotion: exit %d, stderr %q; want a refusal naming the recovery", code, stderr)
	}
	if code, stdout, stderr := runCLI(t, env, "bootstrap", "--recover"); code != 0 {
		t.Fatalf("bootstrap --recover: exit %d\n%s\n%s", code, stdout, stderr)
	}
	p = startRelay(t, env)
	waitSlotActive(t, newPrimary, "deltabus", p)
	prod.run(ctx, t, ha.dsn, 2, 400)
	waitDrained(t, newPrimary, "deltabus", time.Minute)
	// Every command takes the HA DSN whose first host is now gone.
	for _, args := range [][]string{{"rebuild", "--topic", "orders"}, {"janitor"}, {"status"}} {
		if code, stdout, stderr := runCLI(t, env, args...); code != 0 {
			t.Fatalf("relay %s with the HA DSN after the failover: exit %d\n%s\n%s", args[0], code, stdout, stderr)
		}
	}
	if _, lines, _ := runDoctor(t, env); !strings.HasPrefix(strings.Join(lines["database"], ""), "ok") {
		t.Fatalf("relay doctor with the HA DSN after the failover: %q", lines["database"])
	}
	checkFailedOver(t, newPrimary, store, false)
	if code, stdout, stderr := runCLI(t, env, reconcileRecent...); code != 0 {
		t.Fatalf("reconcile after a clean failover: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if err := p.stop(time.Minute); err != nil {
		t.Fatalf("relay did not stop: %v\n%s", err, p.tail())
	}
}

// checkFailedOver checks the store against the new primary's outbox: every
// row in its topic once and in commit order (verify.Compare), and the rows
// the source lacks exactly the phantoms the fork record names (some when
// wantPhantoms, none otherwise). It returns the phantoms' ids.
func checkFailedOver(t *testing.T, dsn string, store storage.Store, wantPhantoms bool) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rep, err := verify.Compare(ctx, conn, "public.outbox", store)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("the topics differ from the new primary's outbox (%d rows):\n%s", rep.SourceRows, strings.Join(rep.Problems, "\n"))
	}
	forks, err := catalog.ListForks(ctx, store)
	if err != nil || len(forks) != 1 {
		t.Fatalf("fork records: %+v %v; want one", forks, err)
	}
	var found []string
	for _, ids := range rep.Phantoms {
		found = append(found, ids...)
	}
	slices.Sort(found)
	var recorded []string
	for _, p := range forks[0].Phantoms {
		recorded = append(recorded, p.IDs...)
	}
	slices.Sort(recorded)
	if !slices.Equal(found, recorded) {
		t.Fatalf("the topics hold %d phantoms, the fork record names %d", len(found), len(recorded))
	}
	if wantPhantoms != (len(recorded) > 0) {
		t.Fatalf("%d phantoms recorded (fork at %s); want some: %v", len(recorded), forks[0].ForkLSN, wantPhantoms)
	}
	t.Logf("%d source rows, each once in its topic; %d phantoms recorded (fork from timeline %d to %d at %s)",
		rep.SourceRows, len(recorded), forks[0].FromTimeline, forks[0].ToTimeline, forks[0].ForkLSN)
	return recorded
}

// checkReconcileNames runs `relay reconcile` and wants exit 1 naming every
// id.
func checkReconcileNames(t *testing.T, env []string, ids []string) {
	t.Helper()
	code, stdout, stderr := runCLI(t, env, append(reconcileRecent, "--json")...)
	if code != 1 {
		t.Fatalf("reconcile: exit %d, want 1\n%s\n%s", code, stdout, stderr)
	}
	for _, id := range ids {
		if !strings.Contains(stdout, id) {
			t.Fatalf("reconcile does not name phantom %s:\n%s", id, stdout)
		}
	}
}

// reconcileRecent checks the last ten minutes in closed windows of a
// second.
var reconcileRecent = []string{"reconcile", "--last", "10m", "--window", "1s", "--lateness", "1ms", "--no-record"}

// TestFailoverSlotResumes: on PostgreSQL 17 and later the relay's slot is a
// failover slot, the standby synchronises it, and the primary sends no
// change its standby lacks. After a kill -9 of the primary under producers
// and the standby's promotion, the relay resumes from the synchronised
// slot by itself, within 10 s of the promotion: no recovery, no operator,
// nothing lost, duplicated or phantom.
func TestFailoverSlotResumes(t *testing.T) {
	for _, major := range failoverSlotMajors(t) {
		t.Run(fmt.Sprintf("PostgreSQL%d", major), func(t *testing.T) { failoverSlotResumes(t, major) })
	}
}

func failoverSlotResumes(t *testing.T, major int) {
	ha := newHACluster(t, major, true)
	url, store := localStore(t)
	env := []string{"DELTABUS_SOURCE=" + ha.dsn, "DELTABUS_STORE=" + url}
	p := startRelay(t, env)
	t.Cleanup(func() { logProblems(t, []*relayProc{p}) })
	waitSlotActive(t, ha.primary.DSN("postgres"), "deltabus", p)

	ctx, stopProducers := context.WithCancel(context.Background())
	defer stopProducers()
	prod := producers{rate: 400}
	produced := make(chan struct{})
	go func() { prod.run(ctx, t, ha.dsn, 4, 1<<30); close(produced) }()
	waitSynced(t, ha.standby.DSN("postgres"), "deltabus")
	time.Sleep(time.Second)
	if err := ha.primary.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ha.standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	newPrimary := ha.standby.DSN("postgres")
	waitSlotActive(t, newPrimary, "deltabus", p)
	resumed := time.Since(promoted)
	t.Logf("PostgreSQL %d: the relay streams from the synchronised slot %s after the promotion (%d events written so far)",
		major, resumed.Round(time.Millisecond), prod.written.Load())
	if resumed > 10*time.Second {
		t.Errorf("the relay resumed %s after the promotion, want within 10s", resumed.Round(time.Millisecond))
	}
	if done, err := p.exited(); done {
		t.Fatalf("the relay exited: %v\n%s", err, p.tail())
	}
	time.Sleep(2 * time.Second) // the new primary's transactions stream
	stopProducers()
	<-produced
	waitDrained(t, newPrimary, "deltabus", 2*time.Minute)
	if err := p.stop(time.Minute); err != nil {
		t.Fatalf("relay did not stop: %v\n%s", err, p.tail())
	}
	checkFailedOver(t, newPrimary, store, false)
}

// waitSynced waits until the standby holds a synchronised, persistent
// copy of the slot: one a promotion keeps.
func waitSynced(t *testing.T, dsn, slot string) {
	t.Helper()
	waitTrue(t, dsn, 2*time.Minute, "the standby synchronises slot "+slot,
		`SELECT coalesce(bool_or(synced AND NOT temporary), false) FROM pg_replication_slots WHERE slot_name = $1`, slot)
}

// checkPhantomsConsumed reads every topic with phantoms through `relay
// consume` and wants "phantom": true on exactly the events the fork record
// names.
func checkPhantomsConsumed(t *testing.T, env []string, store storage.Store) {
	t.Helper()
	forks, err := catalog.ListForks(context.Background(), store)
	if err != nil || len(forks) != 1 {
		t.Fatalf("fork records: %v %v", forks, err)
	}
	for tp, ph := range forks[0].Phantoms {
		code, stdout, stderr := runCLI(t, env, "consume", "--topic", tp, "--group", "audit")
		if code != 0 {
			t.Fatalf("relay consume --topic %s: exit %d\n%s", tp, code, stderr)
		}
		var marked []string
		for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
			var ev struct {
				ID      string `json:"event_id"`
				Phantom bool   `json:"phantom"`
			}
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				t.Fatalf("relay consume --topic %s: %v: %q", tp, err, line)
			}
			if ev.Phantom {
				marked = append(marked, ev.ID)
			}
		}
		want := slices.Clone(ph.IDs)
		slices.Sort(want)
		slices.Sort(marked)
		if !slices.Equal(marked, want) {
			t.Fatalf("relay consume --topic %s marks %d events phantom, the fork record names %d", tp, len(marked), len(want))
		}
	}
}

// getJSON decodes the JSON a GET of url answers.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// TestFailoverSlotBehindStandby: a synchronised failover slot, but no
// synchronized_standby_slots, and the standby cut off while the relay goes
// on: the relay, having published past what the standby received, resumes
// from the synchronised slot by itself, records the events published past
// the fork as phantoms and relays every transaction of the new timeline
// once (their commit LSNs restart below positions the topics hold).
func TestFailoverSlotBehindStandby(t *testing.T) {
	ha := newHACluster(t, failoverSlotMajors(t)[0], true)
	primary := &pgtest.DB{Name: "postgres", DSN: ha.primary.DSN("postgres")}
	primary.Exec(t, "ALTER SYSTEM RESET synchronized_standby_slots")
	primary.Exec(t, "SELECT pg_reload_conf()")
	url, store := localStore(t)
	env := []string{"DELTABUS_SOURCE=" + ha.dsn, "DELTABUS_STORE=" + url}
	p := startRelay(t, env)
	t.Cleanup(func() { logProblems(t, []*relayProc{p}) })
	waitSlotActive(t, primary.DSN, "deltabus", p)

	ctx, stopProducers := context.WithCancel(context.Background())
	defer stopProducers()
	prod := producers{rate: 400}
	produced := make(chan struct{})
	go func() { prod.run(ctx, t, ha.dsn, 4, 1<<30); close(produced) }()
	waitSynced(t, ha.standby.DSN("postgres"), "deltabus")
	received, err := ha.standby.StopReceiving(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fork, _ := pglogrepl.ParseLSN(received)
	waitConfirmedPast(t, primary.DSN, fork+64<<10)
	if err := ha.primary.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ha.standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	newPrimary := ha.standby.DSN("postgres")
	waitSlotActive(t, newPrimary, "deltabus", p)
	time.Sleep(2 * time.Second) // the new primary's transactions stream
	stopProducers()
	<-produced
	waitDrained(t, newPrimary, "deltabus", 2*time.Minute)
	if done, err := p.exited(); done {
		t.Fatalf("the relay exited: %v\n%s", err, p.tail())
	}
	checkFailedOver(t, newPrimary, store, true)
	checkCutAfterFailover(t, env, newPrimary, store)
	if err := p.stop(time.Minute); err != nil {
		t.Fatalf("relay did not stop: %v\n%s", err, p.tail())
	}
}

// checkCutAfterFailover reads the five topics as one consistent cut
// (relay consume --topics, whole transactions up to the source's resolved
// position, each checked against its transaction record) and wants every
// event of the new primary's outbox once and no phantom: the new
// timeline's commit LSNs restart below the old resolved position, which a
// cut in commit LSNs would skip.
func checkCutAfterFailover(t *testing.T, env []string, dsn string, store storage.Store) {
	t.Helper()
	want := queryStrings(t, dsn, "SELECT id::text FROM outbox ORDER BY 1")
	var got []string
	eventually(t, 30*time.Second, "a cut holding every event of the new primary", func() bool {
		code, stdout, stderr := runCLI(t, env, "consume", "--topics", strings.Join(topics, ","))
		if code != 0 {
			t.Fatalf("relay consume --topics: exit %d\n%s", code, stderr)
		}
		got = got[:0]
		for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
			var tx struct {
				Events []struct {
					ID string `json:"event_id"`
				} `json:"events"`
			}
			if err := json.Unmarshal([]byte(line), &tx); err != nil {
				t.Fatalf("relay consume --topics: %v: %q", err, line)
			}
			for _, e := range tx.Events {
				got = append(got, e.ID)
			}
		}
		return len(got) >= len(want)
	})
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("the cut holds %d events, the new primary's outbox %d (phantoms or duplicates in the cut, or events skipped)", len(got), len(want))
	}
}
