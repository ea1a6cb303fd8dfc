package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/subscribe/check"
	"github.com/deltabus/deltabus/tests/pgtest"
)

// TestCheckConsumersPerSource: two PostgreSQL clusters, a relay each on
// default settings, one store and one topic. A group that has read all of
// the first source's events and none of the second's shows, in `relay
// check consumers`, the first source caught up and the second behind,
// each by its appId; once it reads on, both are caught up.
func TestCheckConsumersPerSource(t *testing.T) {
	t.Parallel()
	storeURL, store := localStore(t)
	var dsns, apps [2]string
	for i := range dsns {
		srv := pgtest.NewServer(t)
		dsns[i] = srv.DSN("postgres")
		db := &pgtest.DB{Name: "postgres", DSN: dsns[i], ReplDSN: dsns[i] + "&replication=database"}
		migrate(t, db.Conn(t))
		apps[i] = db.AppID(t, "deltabus")
		relay := startRelay(t, []string{"DELTABUS_SOURCE=" + dsns[i], "DELTABUS_STORE=" + storeURL}, "--batch-max-delay", "10ms")
		waitSlotActive(t, dsns[i], "deltabus", relay)
	}
	env := []string{"DELTABUS_STORE=" + storeURL}
	consume := func() {
		t.Helper()
		if _, errOut, code := runRelayCmd(t, env, "consume", "--topic", "orders", "--group", "g"); code != 0 {
			t.Fatalf("consume: exit %d: %s", code, errOut)
		}
	}
	produceUntilVersion(t, dsns[0], store, "orders", 3)
	// The last events produced may land after version 3: the group reads
	// the first source whole only once its relay has committed them all.
	waitDrained(t, dsns[0], "deltabus", time.Minute)
	consume()
	produceUntilVersion(t, dsns[1], store, "orders", latestVersion(t, store, "orders")+3)
	waitDrained(t, dsns[1], "deltabus", time.Minute)

	bySource := func() map[string]check.SourceRead {
		t.Helper()
		rows, errOut, code := checkRows(t, env)
		r, ok := rows["g"]
		if code != 0 || !ok || len(r.Sources) != 2 {
			t.Fatalf("check consumers: exit %d, row %+v: %s", code, r, errOut)
		}
		m := map[string]check.SourceRead{}
		for _, s := range r.Sources {
			m[s.AppID] = s
		}
		return m
	}
	behind := bySource()
	if a, b := behind[apps[0]], behind[apps[1]]; a.LagBytes != 0 || a.Read != a.Latest || b.LagBytes <= 0 || b.Read == b.Latest {
		t.Fatalf("after reading only the first source: %+v; want %s caught up, %s behind", behind, apps[0], apps[1])
	}
	out, errOut, code := runRelayCmd(t, env, "check", "consumers")
	if code != 0 || !strings.Contains(out, apps[0]) || !strings.Contains(out, apps[1]+" ") || !strings.Contains(out, "behind") {
		t.Fatalf("check consumers (text): exit %d, want both sources and a lag\n%s\n%s", code, out, errOut)
	}
	t.Logf("check consumers:\n%s", out)

	consume()
	for app, s := range bySource() {
		if s.LagBytes != 0 || s.Read != s.Latest {
			t.Errorf("after reading on: source %s %+v; want caught up", app, s)
		}
	}
}
