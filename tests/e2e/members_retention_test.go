package e2e

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
	"github.com/deltabus/deltabus/subscribe/members"
	"github.com/deltabus/deltabus/subscribe/serve"
)

// startServe starts `relay serve` on a free loopback port and waits for
// /healthz; it returns the process, a client of it and its base URL.
func startServe(t testing.TB, env []string) (*relayProc, *serve.Client, string) {
	t.Helper()
	addr := freeAddr(t)
	p := startProc(t, buildRelay(t), env, "serve", "--addr", addr, "--log-level", "warn")
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, serve.NewClient("http://"+addr, "", nil), "http://" + addr
			}
		}
		if done, err := p.exited(); done || time.Now().After(deadline) {
			t.Fatalf("relay serve did not come up: %v\n%s", err, p.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// drainGroup receives and acknowledges group's events until none comes
// for a second; it returns their ids in the order received.
func drainGroup(t testing.TB, c members.Source, group string) ([]string, error) {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for {
		msgs, err := c.Receive(ctx, group, "orders", members.ReceiveRequest{Member: "drain", Max: 500, Wait: time.Second})
		if err != nil {
			return ids, err
		}
		if len(msgs) == 0 {
			return ids, nil
		}
		acks := make([]string, len(msgs))
		for i, m := range msgs {
			ids, acks[i] = append(ids, m.Event.ID), m.AckID
		}
		if res, err := c.Ack(ctx, group, "orders", acks); err != nil || res.Done != len(acks) {
			t.Fatalf("ack: %+v %v", res, err)
		}
	}
}

// ageTable sets every file of the table at root/dir two hours back, as
// if the group had been stopped that long.
func ageTable(t testing.TB, dir string) {
	t.Helper()
	old := time.Now().Add(-2 * time.Hour)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chtimes(p, old, old)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestProtectedGroupReadsEverythingPastRetention: a members group is
// stopped at version 110 and protected; the topic goes on to version 230
// (checkpoints at 100 and 200), is compacted, and its files are aged past
// a one-hour retention; `relay vacuum` then cleans the log and vacuums.
// An unprotected group stopped at version 20 meets the retention error;
// the protected group, served again, reads every event after its position,
// in topic order, and `relay check consumers` shows the hold it kept.
func TestProtectedGroupReadsEverythingPastRetention(t *testing.T) {
	storeURL, store := localStore(t)
	db := setup(t)
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + storeURL}
	relay := startRelay(t, env, "--batch-max-delay", "10ms")
	waitSlotActive(t, db.DSN, "deltabus", relay)
	srv, c, _ := startServe(t, env)

	produceUntilVersion(t, db.DSN, store, "orders", 20)
	if _, err := drainGroup(t, c, "late"); err != nil {
		t.Fatal(err)
	}
	produceUntilVersion(t, db.DSN, store, "orders", 110)
	first, err := drainGroup(t, c, "protected")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.stop(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	list, err := members.List(context.Background(), store)
	if err != nil || len(list) != 2 {
		t.Fatalf("members groups in the store: %+v %v", list, err)
	}
	from := list[1].Position // "protected" sorts after "late"
	if _, errOut, code := runRelayCmd(t, env, "members", "protect", "--group", "protected", "--topic", "orders", "--max-hold", "24h"); code != 0 {
		t.Fatalf("members protect: %d %s", code, errOut)
	}

	produceUntilVersion(t, db.DSN, store, "orders", 230)
	waitDrained(t, db.DSN, "deltabus", time.Minute)
	if err := relay.stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	truth := topicEvents(t, store, "orders") // in order, read before anything is cleaned
	if _, errOut, code := runRelayCmd(t, env, "compact"); code != 0 {
		t.Fatalf("compact: %d %s", code, errOut)
	}
	ageTable(t, filepath.Join(strings.TrimPrefix(storeURL, "file://"), "orders"))
	out, errOut, code := runRelayCmd(t, env, "vacuum", "--log-retention", "1h", "--file-retention", "1h")
	if code != 0 {
		t.Fatalf("vacuum: %d %s %s", code, out, errOut)
	}
	view, err := subscribe.ListLog(context.Background(), storage.Sub(store, "orders"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if view.First > from.Version || view.First <= 20 {
		t.Fatalf("after the vacuum the log starts at version %d; want it cleaned past the unprotected group (20) and kept for the protected one (%d)\n%s",
			view.First, from.Version, out)
	}

	_, c, _ = startServe(t, env)
	if _, err := drainGroup(t, c, "late"); err == nil || !strings.Contains(err.Error(), "retention passed") {
		t.Fatalf("the unprotected group: %v; want the retention error", err)
	} else {
		var se *serve.StatusError
		if !errors.As(err, &se) || se.Code != http.StatusConflict {
			t.Fatalf("the unprotected group's error: %v; want a 409", err)
		}
	}
	got, err := drainGroup(t, c, "protected")
	if err != nil {
		t.Fatal(err)
	}
	all := append(first, got...)
	if len(all) != len(truth) {
		t.Fatalf("the protected group read %d events before it stopped and %d after; the topic holds %d", len(first), len(got), len(truth))
	}
	// One member reads a key's events one after the other, keys side by
	// side: each key's events in commit order.
	keyOf, byKey := map[string]string{}, map[string][]string{}
	for _, e := range truth {
		keyOf[e.ID], byKey[e.Key] = e.Key, append(byKey[e.Key], e.ID)
	}
	next := map[string]int{}
	for i, id := range all {
		k, ok := keyOf[id]
		if !ok || byKey[k][next[k]] != id {
			t.Fatalf("read %d is %s: not key %s's next event in commit order", i, id, k)
		}
		next[k]++
	}
	rows, _, _ := checkRows(t, env)
	if r := rows["protected"]; r.Members == nil || r.Members.MaxHoldSeconds != 24*3600 {
		t.Fatalf("check consumers row of the protected group: %+v", r)
	}
	t.Logf("the protected group read the %d events after version %d; the log now starts at %d", len(got), from.Version, view.First)
}
