package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
	"github.com/deltabus/deltabus/txlog"
)

// checkTransactionRecords asserts that _transactions holds exactly one
// record per source transaction of truth, each counting exactly that
// transaction's rows per table, and that the source's resolved position
// is past the last of them. The crash tests call it after every kill
// sequence: records are exactly once, like the topics.
func checkTransactionRecords(t testing.TB, root storage.Store, truth []truthRow) {
	t.Helper()
	ctx := context.Background()
	want := map[int64]map[string]int64{}
	var last int64
	for _, r := range truth {
		tp := r.Topic
		if outbox.ValidTopic(tp) != nil {
			tp = outbox.DeadLetterTopic
		}
		c := int64(r.CommitLSN)
		if want[c] == nil {
			want[c] = map[string]int64{}
		}
		want[c][tp]++
		last = max(last, c)
	}
	recs, err := txlog.Read(ctx, root, txlog.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for _, r := range recs {
		if seen[r.CommitLSN] {
			t.Fatalf("transaction at commit LSN %d recorded twice", r.CommitLSN)
		}
		seen[r.CommitLSN] = true
		w, ok := want[r.CommitLSN]
		if !ok {
			t.Fatalf("record of a transaction the source never committed: %+v", r)
		}
		if fmt.Sprint(w) != fmt.Sprint(r.Topics) {
			t.Fatalf("record of transaction %d (commit LSN %d) counts %v, the source wrote %v", r.Xid, r.CommitLSN, r.Topics, w)
		}
		var sum int64
		for _, n := range w {
			sum += n
		}
		if r.Events != sum {
			t.Fatalf("record of transaction %d counts %d events in all, want %d", r.Xid, r.Events, sum)
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("%d transactions recorded, the source committed %d with events", len(seen), len(want))
	}
	res, err := catalog.ListResolved(ctx, root)
	if err != nil || len(res) != 1 {
		t.Fatalf("resolved positions: %+v %v; want one", res, err)
	}
	if res[0].LSN <= last {
		t.Fatalf("resolved position %d is not past the last transaction (commit LSN %d)", res[0].LSN, last)
	}
}

// TestConsistentCutAcrossTopicsAndSources: two source databases write
// transactions spanning two topics into one store, each through its own
// relay process. While they stream, cuts read up to each source's resolved
// position hold every transaction below it whole (all its events of both
// topics, as its transaction record counts), and none above; one cut is
// read by `relay consume --topics`.
func TestConsistentCutAcrossTopicsAndSources(t *testing.T) {
	url, store := localStore(t)
	type src struct {
		dsn   string
		slot  string
		truth *truthSlot
		prod  *producers
		p     *relayProc
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const events = 1500
	var srcs []*src
	for i := range 2 {
		db := setup(t)
		s := &src{dsn: db.DSN, slot: fmt.Sprintf("cut_%d_%d", i, time.Now().UnixNano()%1e6)}
		s.truth = newTruthSlot(t, db, "deltabus")
		s.prod = &producers{topics: []string{"orders", "payments"}, rate: 400}
		s.p = startRelay(t, []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + url}, "--slot", s.slot)
		waitSlotActive(t, db.DSN, s.slot, s.p)
		srcs = append(srcs, s)
	}
	done := make(chan struct{}, len(srcs))
	for _, s := range srcs {
		go func() { s.prod.run(ctx, t, s.dsn, 2, events); done <- struct{}{} }()
	}
	// Cuts while the relays stream: each must be whole (ReadCut checks
	// every transaction against its record).
	reads := 0
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); reads++ {
		for _, r := range mustResolved(t, store) {
			if _, err := subscribe.ReadCut(ctx, store, subscribe.CutOptions{Topics: []string{"orders", "payments"}, Source: r.Source}); err != nil {
				t.Fatalf("cut of %s while streaming: %v", r.Source, err)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	for range srcs {
		<-done
	}
	for _, s := range srcs {
		waitDrained(t, s.dsn, s.slot, 2*time.Minute)
	}
	time.Sleep(1500 * time.Millisecond) // one resolved interval after the last acknowledgement
	res := mustResolved(t, store)
	if len(res) != 2 {
		t.Fatalf("resolved positions %+v, want one per source", res)
	}
	for i, s := range srcs {
		truth := s.truth.read(t)
		r := res[0]
		if !strings.Contains(r.Source, s.slot) {
			r = res[1]
		}
		cut, err := subscribe.ReadCut(ctx, store, subscribe.CutOptions{Topics: []string{"orders", "payments"}, Source: r.Source})
		if err != nil {
			t.Fatal(err)
		}
		checkCutAgainstTruth(t, cut, truth)
		if i == 0 {
			checkConsumeCut(t, url, r.Source, cut)
			checkServeCut(t, url, r.Source, cut)
		}
	}
	for _, s := range srcs {
		if err := s.p.stop(time.Minute); err != nil {
			t.Fatalf("relay did not stop on SIGTERM: %v\n%s", err, s.p.tail())
		}
	}
	t.Logf("%d cuts read while streaming", reads)
}

func mustResolved(t testing.TB, store storage.Store) []catalog.Resolved {
	t.Helper()
	res, err := catalog.ListResolved(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// checkCutAgainstTruth: the cut holds exactly the source's transactions
// below its resolved position, each with all its events, in order.
func checkCutAgainstTruth(t testing.TB, cut *subscribe.Cut, truth []truthRow) {
	t.Helper()
	var want [][]string
	prev := int64(-1)
	for _, r := range truth {
		if int64(r.CommitLSN) >= cut.Resolved {
			continue
		}
		if int64(r.CommitLSN) != prev {
			want, prev = append(want, nil), int64(r.CommitLSN)
		}
		want[len(want)-1] = append(want[len(want)-1], r.ID)
	}
	var got [][]string
	for _, tx := range cut.Transactions {
		if tx.Record == nil {
			t.Fatalf("transaction at %d has no record", tx.CommitLSN)
		}
		var ids []string
		for _, e := range tx.Events {
			ids = append(ids, e.ID)
		}
		got = append(got, ids)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("cut of %s below %d: %d transactions, the source committed %d below it (or their events differ)", cut.Source, cut.Resolved, len(got), len(want))
	}
}

// checkConsumeCut runs relay consume --topics and compares its lines with
// the cut read in process.
func checkConsumeCut(t testing.TB, url, source string, cut *subscribe.Cut) {
	t.Helper()
	cmd := exec.Command(buildRelay(t), "consume", "--store", url, "--topics", "orders,payments", "--source", source)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("relay consume --topics: %v", err)
	}
	var txs int
	var resolved int64
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var line struct {
			CommitLSN int64             `json:"commit_lsn"`
			Resolved  int64             `json:"resolved"`
			Events    []json.RawMessage `json:"events"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("relay consume --topics printed %q: %v", sc.Text(), err)
		}
		if line.Resolved != 0 {
			resolved = line.Resolved
			continue
		}
		txs++
	}
	if resolved < cut.Resolved || txs < len(cut.Transactions) {
		t.Fatalf("relay consume --topics: %d transactions up to %d, the cut read %d up to %d", txs, resolved, len(cut.Transactions), cut.Resolved)
	}
}

// checkServeCut reads the same cut over HTTP (relay serve, GET /v1/cuts):
// the same resolved position and transactions, event for event; a request
// without topics is a 400 with one line.
func checkServeCut(t testing.TB, url, source string, cut *subscribe.Cut) {
	t.Helper()
	p, _, base := startServe(t, []string{"DELTABUS_STORE=" + url})
	defer func() { _ = p.stop(time.Minute) }()
	var got struct {
		Resolved     int64 `json:"resolved"`
		Transactions []struct {
			CommitLSN int64 `json:"commit_lsn"`
			Events    []struct {
				ID string `json:"event_id"`
			} `json:"events"`
		} `json:"transactions"`
	}
	getJSON(t.(*testing.T), base+"/v1/cuts?topics=orders,payments&source="+source, &got)
	if got.Resolved != cut.Resolved || len(got.Transactions) != len(cut.Transactions) {
		t.Fatalf("GET /v1/cuts: %d transactions up to %d, ReadCut %d up to %d", len(got.Transactions), got.Resolved, len(cut.Transactions), cut.Resolved)
	}
	for i, tx := range got.Transactions {
		want := cut.Transactions[i]
		if tx.CommitLSN != want.CommitLSN || len(tx.Events) != len(want.Events) {
			t.Fatalf("GET /v1/cuts transaction %d: commit LSN %d with %d events, ReadCut %d with %d", i, tx.CommitLSN, len(tx.Events), want.CommitLSN, len(want.Events))
		}
		for j, e := range tx.Events {
			if e.ID != want.Events[j].ID {
				t.Fatalf("GET /v1/cuts transaction %d event %d is %s, ReadCut's %s", i, j, e.ID, want.Events[j].ID)
			}
		}
	}
	resp, err := http.Get(base + "/v1/cuts")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("GET /v1/cuts without topics: %s, want 400", resp.Status)
	}
}
