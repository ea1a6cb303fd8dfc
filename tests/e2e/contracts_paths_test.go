package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/pgtest"
)

// contractCLI is a test's source database, slot and local store, and
// runs relay commands on them: run fails the test on another exit code
// and returns the output; register registers a schema.
type contractCLI struct {
	t     *testing.T
	db    *pgtest.DB
	slot  string
	url   string
	store storage.Store
	env   []string
	dir   string
}

func newContractCLI(t *testing.T, slotPrefix string) contractCLI {
	db := setup(t)
	url, store := localStore(t)
	slot := fmt.Sprintf("%s_%08x", slotPrefix, rand.Uint32())
	return contractCLI{t: t, db: db, slot: slot, url: url, store: store, dir: t.TempDir(),
		env: []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + url, "DELTABUS_SLOT=" + slot}}
}

func (c contractCLI) run(want int, args ...string) string {
	c.t.Helper()
	code, stdout, stderr := runCLI(c.t, c.env, args...)
	if code != want {
		c.t.Fatalf("relay %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, stdout, stderr)
	}
	return stdout + stderr
}

func (c contractCLI) register(topic, typ string, version int, schema string) {
	c.t.Helper()
	p := filepath.Join(c.dir, fmt.Sprintf("%s-%s-%d.json", topic, typ, version))
	if err := os.WriteFile(p, []byte(schema), 0o644); err != nil {
		c.t.Fatal(err)
	}
	c.run(0, "contract", "register", "--topic", topic, "--type", typ, "--version", fmt.Sprint(version), "--schema", p, "--compatibility", "NONE")
}

// insertEvent writes one outbox row by SQL, in a transaction of its own,
// and returns its id.
func insertEvent(t testing.TB, db *pgtest.DB, topic, typ string, version int, payload string) string {
	t.Helper()
	id := outbox.NewID()
	db.Exec(t, fmt.Sprintf(`INSERT INTO outbox (id, topic, key, type, schema_version, payload) VALUES ('%s', '%s', 'k', '%s', %d, '%s')`,
		id, topic, typ, version, payload))
	return id
}

// TestContractHoldInsideABatch: a topic that holds on contract violations,
// a valid event and the refused one in transactions that fall into one
// batch (a batch delay, as a busy committer or pacing makes), then more
// events. Once the missing version is registered the topic holds every
// event, the refused one included, once each: the batch's commit of the
// topic did not record a position at or past the hold.
func TestContractHoldInsideABatch(t *testing.T) {
	t.Parallel()
	cli := newContractCLI(t, "holdbatch")
	db, slot, store := cli.db, cli.slot, cli.store
	cli.register("held", "Thing", 1, thingV1)
	cli.run(0, "contract", "policy", "--topic", "held", "--on-violation", "hold")
	p := startRelay(t, cli.env, "--batch-max-delay", "1s", "--contracts-poll", "300ms")
	waitSlotActive(t, db.DSN, slot, p)

	var want []string
	want = append(want, insertEvent(t, db, "held", "Thing", 1, `{"n": 1}`))
	want = append(want, insertEvent(t, db, "held", "Thing", 2, `{"n": 2, "tag": "v2"}`)) // refused: v2 is not registered
	want = append(want, insertEvent(t, db, "held", "Thing", 1, `{"n": 3}`))
	after := insertEvent(t, db, "other", "Thing", 1, `{}`)
	eventually(t, time.Minute, "held is held while other streams", func() bool {
		return heldState(t.Context(), store, "held").Paused == catalog.HoldContract && slices.Contains(topicIDsSoFar(t, store, "other"), after)
	})
	cli.register("held", "Thing", 2, thingV2)
	eventually(t, time.Minute, "held resumes with every event", func() bool {
		return len(topicIDsSoFar(t, store, "held")) >= len(want)
	})
	time.Sleep(500 * time.Millisecond) // a duplicate would land meanwhile
	if got := topicIDsSoFar(t, store, "held"); !slices.Equal(got, want) {
		t.Fatalf("held holds %d of %d events sent: %v, want %v\n%s", len(got), len(want), got, want, p.tail())
	}
	if err := p.stop(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, p.tail())
	}
}

// TestContractsOnTheSnapshotPaths: the first start's snapshot and `relay
// rebuild` judge events as the stream does: an event that breaks its
// contract, or whose type has none in a strict topic, written before the
// first start, goes to _dead_letter with its reason and not to its topic;
// a rebuild afterwards copies neither into the topic again, and writes no
// dead letter twice.
func TestContractsOnTheSnapshotPaths(t *testing.T) {
	t.Parallel()
	cli := newContractCLI(t, "snapcontracts")
	db, slot, url, store := cli.db, cli.slot, cli.url, cli.store
	cli.register("orders", "OrderPlaced", 1, placedV1)
	cli.run(0, "contract", "policy", "--topic", "orders", "--strict=true")

	valid := insertEvent(t, db, "orders", "OrderPlaced", 1, `{"order_id": 1}`)
	invalid := insertEvent(t, db, "orders", "OrderPlaced", 1, `{"order_id": "one"}`)
	uncontracted := insertEvent(t, db, "orders", "Uncontracted", 1, `{}`)
	p := startRelay(t, cli.env, "--batch-max-delay", "20ms")
	waitSlotActive(t, db.DSN, slot, p)
	streamed := insertEvent(t, db, "orders", "OrderPlaced", 1, `{"order_id": 2}`)
	streamedBad := insertEvent(t, db, "orders", "OrderPlaced", 1, `{}`)
	waitDrained(t, db.DSN, slot, time.Minute)
	wantOrders := []string{valid, streamed}
	reasons := map[string]string{
		invalid:      `contract orders/OrderPlaced v1 at "/order_id"`,
		uncontracted: `topic "orders" is strict`,
		streamedBad:  `contract orders/OrderPlaced v1`,
	}
	check := func(when string) {
		t.Helper()
		if got := topicIDsSoFar(t, store, "orders"); !slices.Equal(got, wantOrders) {
			t.Fatalf("%s: orders holds %v, want %v", when, got, wantOrders)
		}
		dls := deadLetters(t, cli.env, url)
		if len(dls) != len(reasons) {
			t.Errorf("%s: _dead_letter holds %v, want %d dead letters", when, dls, len(reasons))
		}
		for id, want := range reasons {
			if !strings.Contains(dls[id], want) {
				t.Errorf("%s: dead letter %s: reason %q, want %q", when, id, dls[id], want)
			}
		}
		if n := countRows(t, cli.env, url); n != len(reasons) {
			t.Errorf("%s: _dead_letter has %d rows, want %d (none twice)", when, n, len(reasons))
		}
	}
	check("after the first start")

	moveAway(t, url, "orders")
	out := cli.run(0, "rebuild", "--topic", "orders")
	if !strings.Contains(out, "committed by the relay") {
		t.Fatalf("rebuild: %s\nrelay:\n%s", out, p.tail())
	}
	check("after a rebuild")
	if err := p.stop(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, p.tail())
	}
}

// countRows counts _dead_letter's rows with `relay tail`.
func countRows(t testing.TB, env []string, storeURL string) int {
	t.Helper()
	code, stdout, stderr := runCLI(t, env, "tail", strings.TrimSuffix(storeURL, "/")+"/"+outbox.DeadLetterTopic)
	if code != 0 {
		t.Fatalf("relay tail: exit %d: %s", code, stderr)
	}
	return strings.Count(stdout, "\n")
}
