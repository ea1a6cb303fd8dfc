package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
	"github.com/deltabus/deltabus/subscribe/retentiontest"
	"github.com/deltabus/deltabus/tests/pgtest"
)

// TestCheckConsumers: `relay check consumers` shows, one row per group, a
// stopped consumer's lag growing, a lagging consumer's retention headroom
// shrinking (time passing, then log clean-up), an effectively-once
// consumer complete without duplicates, and a consumer without
// deduplication (checkpoint in the store, replayed) by its duplicate rate;
// a breached threshold exits 1.
func TestCheckConsumers(t *testing.T) {
	storeURL, store := localStore(t)
	db := setup(t)
	cdb := pgtest.NewDB(t)
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + storeURL}
	relay := startRelay(t, env, "--batch-max-delay", "10ms")
	waitSlotActive(t, db.DSN, "deltabus", relay)

	produceUntilVersion(t, db.DSN, store, "orders", 30)
	for _, g := range []string{"stopped", "lagging"} {
		if _, errOut, code := runRelayCmd(t, env, "consume", "--topic", "orders", "--group", g); code != 0 {
			t.Fatalf("consume %s: exit %d: %s", g, code, errOut)
		}
	}
	cp, ok, err := subscribe.NewStoreCheckpoints(store).Load(context.Background(), "lagging", "orders")
	if err != nil || !ok {
		t.Fatalf("checkpoint of group lagging: %v %t", err, ok)
	}
	pos := cp.Version
	produceUntilVersion(t, db.DSN, store, "orders", 105) // the relay checkpoints version 100
	good := []string{"--store", storeURL, "--topic", "orders", "--dsn", cdb.DSN, "--follow=false"}
	runMaterialize(t, append(good, "--group", "good", "--table", "orders_good"))
	broken := append(good, "--group", "broken", "--table", "orders_broken", "--checkpoint", "store")
	runMaterialize(t, broken)
	runMaterialize(t, append(broken, "--from-version", "0")) // a replay without deduplication
	time.Sleep(2 * time.Second)                              // the last events' period closes (--period 1s, --grace 1s)

	args := []string{"--checkpoint", cdb.DSN, "--materialized", "good:public.orders_good:event_id",
		"--materialized", "broken:public.orders_broken:event_id", "--period", "1s", "--periods", "600", "--grace", "1s"}
	first, errOut, code := checkRows(t, env, args...)
	if code != 0 || len(first) != 4 {
		t.Fatalf("check without thresholds: exit %d, %d rows: %s", code, len(first), errOut)
	}
	for _, g := range []string{"good", "broken"} {
		c := first[g].Completeness
		if c == nil || c.Expected < 100 || c.Ratio != 1 || c.Missing != 0 || first[g].LagVersions != 0 {
			t.Fatalf("group %s: %+v, completeness %+v", g, first[g], c)
		}
	}
	if c := first["good"].Completeness; c.Duplicates != 0 || c.DuplicateRate != 0 {
		t.Errorf("effectively-once group has duplicates: %+v", c)
	}
	if c := first["broken"].Completeness; c.Duplicates != c.Found || c.DuplicateRate != 0.5 {
		t.Errorf("replayed group without dedup: %+v, want every key twice (rate 0.5)", c)
	}
	if r := first["lagging"]; r.Version != pos || r.HeadroomVersions != pos || r.HeadroomSeconds <= 0 {
		t.Fatalf("lagging row %+v", r)
	}

	produceUntilVersion(t, db.DSN, store, "orders", first["stopped"].LatestVersion+10)
	retentiontest.CleanLog(t, storage.Sub(store, "orders"), pos-10)
	second, _, _ := checkRows(t, env, args...)
	if a, b := first["stopped"], second["stopped"]; b.LagVersions < a.LagVersions+10 || b.LagSeconds <= a.LagSeconds {
		t.Errorf("stopped consumer's lag did not grow: %d versions %.1fs, then %d versions %.1fs", a.LagVersions, a.LagSeconds, b.LagVersions, b.LagSeconds)
	}
	if a, b := first["lagging"], second["lagging"]; b.HeadroomVersions != 10 || b.HeadroomSeconds >= a.HeadroomSeconds {
		t.Errorf("lagging consumer's headroom did not shrink: %d versions %.1fs, then %d versions %.1fs",
			a.HeadroomVersions, a.HeadroomSeconds, b.HeadroomVersions, b.HeadroomSeconds)
	}

	out, errOut, code := runRelayCmd(t, env, append([]string{"check", "consumers", "--max-duplicate-rate", "0", "--max-lag-versions", "50"}, args...)...)
	if code != 1 || !strings.Contains(out, "BREACH broken/orders: duplicate rate 0.5000 > 0.0000") ||
		!strings.Contains(out, "BREACH stopped/orders: lag") || strings.Contains(out, "BREACH good/") {
		t.Fatalf("check with thresholds: exit %d\n%s\n%s", code, out, errOut)
	}
}

// runMaterialize runs the example consumer to completion.
func runMaterialize(t testing.TB, args []string) {
	t.Helper()
	p := startConsumer(t, nil, args...)
	select {
	case err := <-p.doneOnce():
		if err != nil {
			t.Fatalf("materialize %v: %v\n%s", args, err, p.tail())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("materialize %v did not finish", args)
	}
}
