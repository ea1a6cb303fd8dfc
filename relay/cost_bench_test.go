package relay

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgproto3"

	pg "github.com/deltabus/deltabus/decoding/pgoutputtest"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink"
	"github.com/deltabus/deltabus/sink/deltasink"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/deltabus/deltabus/tests/s3test"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(s3test.Wrap(m))) }

// S3 request prices (us-east-1 standard): PUT, COPY, POST and LIST per
// 1,000 requests, GET per 1,000.
const (
	putPrice      = 0.005 / 1000
	getPrice      = 0.0004 / 1000
	secondsMonth  = 30 * 24 * 3600
	costTopicName = "orders"
)

// BenchmarkTopicCost runs one topic at 1, 10, 100 and 1,000 events/s
// (Poisson arrivals, single-row transactions) through a session into a
// Delta table on S3 (versitygw), with the topic commit interval off, at
// its S3 default and at 5 s. It counts the store's requests and reports
// the end-to-end latency (event sent to acknowledged) and what the
// requests would cost per month at S3 prices. DELTABUS_COST_SECONDS sets
// each run's length (default 15).
func BenchmarkTopicCost(b *testing.B) {
	d := costDuration()
	for _, setting := range []struct {
		name     string
		interval time.Duration
	}{{"interval=none", -1}, {"interval=default", 0}, {"interval=5s", 5 * time.Second}} {
		for _, rate := range []int{1, 10, 100, 1000} {
			b.Run(fmt.Sprintf("%s/rate=%d", setting.name, rate), func(b *testing.B) {
				for b.Loop() {
					runCost(b, setting.interval, rate, d)
				}
			})
		}
	}
}

// costDuration is a cost run's length: DELTABUS_COST_SECONDS, default 15 s.
func costDuration() time.Duration {
	secs := 15
	if v, err := strconv.Atoi(os.Getenv("DELTABUS_COST_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	return time.Duration(secs) * time.Second
}

func runCost(b *testing.B, interval time.Duration, rate int, d time.Duration) {
	r := measureCost(b, interval, newPacedConn(rate), d, nil)
	b.ReportMetric(float64(pct(r.lat, 50).Milliseconds()), "p50-ms")
	b.ReportMetric(float64(pct(r.lat, 99).Milliseconds()), "p99-ms")
	b.ReportMetric(r.perSec(r.puts), "PUT/s")
	b.ReportMetric(float64(r.puts)/float64(len(r.lat)), "PUT/event")
	b.ReportMetric(r.monthly(), "$/month")
	b.ReportMetric(0, "ns/op")
}

// costRun is what one run measured in its steady state (after the
// warm-up).
type costRun struct {
	d          time.Duration
	lat        []time.Duration
	puts, gets int // store calls priced as PUTs (Put, PutIfAbsent, List, Delete) and as GETs
	commits    int // versions the tables named to measureCost gained
}

func (r costRun) perSec(n int) float64 { return float64(n) / r.d.Seconds() }

// monthly is what the requests would cost a month at S3 prices.
func (r costRun) monthly() float64 {
	return (r.perSec(r.puts)*putPrice + r.perSec(r.gets)*getPrice) * secondsMonth
}

// measureCost runs conn's load for d through a session into a Delta store
// on S3 (versitygw) and counts the store's requests. prepare, when set,
// runs on the store before the session starts; the commits of tables
// (folders under the store root) are counted.
func measureCost(b *testing.B, interval time.Duration, conn *pacedConn, d time.Duration,
	prepare func(context.Context, storage.Store) error, tables ...string) costRun {
	bucket := s3test.NewBucket(b)
	ctx := context.Background()
	inner, err := storage.Open(ctx, bucket.URL("cost"), bucket.Options())
	if err != nil {
		b.Fatal(err)
	}
	if prepare != nil {
		if err := prepare(ctx, inner); err != nil {
			b.Fatal(err)
		}
	}
	store := storage.NewFaulty(inner)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("DELTABUS_COST_LOG") == "debug" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	snk := deltasink.New(store, deltasink.Options{AppID: "deltabus-cost", Logger: log})
	cfg := Config{Source: "postgres://u@127.0.0.1/db", Store: bucket.URL("cost"), TopicCommitInterval: interval,
		StatusInterval: 5 * time.Millisecond}
	r := New(cfg, store, func(string) sink.Sink { return snk }, outbox.Mappings{}, log, nil)
	runCtx, stop := context.WithCancel(ctx)
	hard, cancel := afterStop(runCtx, r.cfg.ShutdownTimeout)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- r.serve(runCtx, hard, conn, 0x1000) }()
	conn.warmup(b) // the tables' creation is not part of the steady state
	before := countVersions(b, inner, tables)
	store.Reset()
	conn.start(d)
	conn.drained(b, 30*time.Second+2*r.cfg.TopicCommitInterval, errc)
	run := costRun{d: d, gets: store.Calls(storage.OpGet),
		puts: store.Calls(storage.OpPut) + store.Calls(storage.OpPutIfAbsent) + store.Calls(storage.OpList) + store.Calls(storage.OpDelete)}
	if testing.Verbose() {
		b.Logf("put %d putIfAbsent %d list %d delete %d get %d", store.Calls(storage.OpPut), store.Calls(storage.OpPutIfAbsent),
			store.Calls(storage.OpList), store.Calls(storage.OpDelete), run.gets)
	}
	stop()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	run.commits = countVersions(b, inner, tables) - before
	run.lat = conn.latencies()
	return run
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p/100))]
}

// pacedConn sends single-row transactions with exponential gaps (rate
// per second on average), each of a topic drawn at random from its topics
// (so each of n topics is Poisson at rate/n), and measures, per
// transaction, the time from its sending to the acknowledgement of its
// end. Its warm-up sends one transaction per topic.
type pacedConn struct {
	rate  int
	rng   *rand.Rand
	queue [][]byte
	lsn   pglogrepl.LSN
	n     int
	next  time.Time // when the next transaction is sent
	until time.Time // no transaction is sent after it

	topics []string

	mu      sync.Mutex
	startC  chan struct{}
	pending []sentTx // in LSN order
	lat     []time.Duration
	acked   pglogrepl.LSN
	ackC    chan struct{}
}

type sentTx struct {
	end pglogrepl.LSN
	at  time.Time
}

// newPacedConn sends to topics (none: costTopicName).
func newPacedConn(rate int, topics ...string) *pacedConn {
	if len(topics) == 0 {
		topics = []string{costTopicName}
	}
	c := &pacedConn{rate: rate, topics: topics, rng: rand.New(rand.NewPCG(1, uint64(rate))), lsn: 0x1000, startC: make(chan struct{}, 1), ackC: make(chan struct{}, 1)}
	c.push(pg.Relation(1, "public", "outbox", pg.OutboxColumns()))
	return c
}

func (c *pacedConn) push(m []byte) {
	c.lsn += 0x100
	c.queue = append(c.queue, pg.XLogData(c.lsn, m))
}

// tx queues one transaction and records it as sent.
func (c *pacedConn) tx(topic string) {
	c.n++
	commit := c.lsn + 0x300
	now := time.Now()
	c.push(pg.Begin(commit, now, uint32(c.n)))
	c.push(pg.Insert(1, pg.OutboxTuple(fmt.Sprintf("00000000-0000-4000-8000-%012d", c.n), topic, benchPayload)...))
	c.lsn = commit - 0x100
	c.push(pg.Commit(commit, commit+0x10, now))
	c.mu.Lock()
	c.pending = append(c.pending, sentTx{end: commit + 0x10, at: now})
	c.mu.Unlock()
}

// topic draws the next transaction's topic.
func (c *pacedConn) topic() string {
	if len(c.topics) == 1 {
		return c.topics[0] // the generator draws only the gaps
	}
	return c.topics[c.rng.IntN(len(c.topics))]
}

func (c *pacedConn) warmup(b *testing.B) {
	c.startC <- struct{}{}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		c.mu.Lock()
		done := len(c.lat) > 0 && len(c.pending) == 0
		if done {
			c.lat = nil
		}
		c.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			b.Fatal("the warm-up transaction was not acknowledged")
		}
	}
}

func (c *pacedConn) start(d time.Duration) {
	c.mu.Lock()
	c.until = time.Now().Add(d)
	c.mu.Unlock()
	c.startC <- struct{}{}
}

func (c *pacedConn) Receive(ctx context.Context, until time.Time) (pgproto3.BackendMessage, error) {
	for {
		if len(c.queue) > 0 {
			m := c.queue[0]
			c.queue = c.queue[1:]
			return &pgproto3.CopyData{Data: m}, nil
		}
		select {
		case <-c.startC:
			c.mu.Lock()
			running := !c.until.IsZero()
			c.mu.Unlock()
			if !running {
				for _, t := range c.topics { // the warm-up transactions
					c.tx(t)
				}
				continue
			}
			c.next = time.Now()
		default:
		}
		now := time.Now()
		c.mu.Lock()
		end := c.until
		c.mu.Unlock()
		if !c.next.IsZero() && !now.Before(c.next) && now.Before(end) {
			c.tx(c.topic())
			c.next = c.next.Add(time.Duration(c.rng.ExpFloat64() / float64(c.rate) * float64(time.Second)))
			continue
		}
		wake := until
		if !c.next.IsZero() && now.Before(end) && c.next.Before(wake) && c.next.Before(end) {
			wake = c.next
		}
		t := time.NewTimer(time.Until(wake))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-c.startC:
			t.Stop()
			c.startC <- struct{}{} // handled at the top of the loop
		case <-t.C:
			if !wake.Before(until) {
				return nil, nil
			}
		}
	}
}

// Wake: a benchmark stops by its context.
func (c *pacedConn) Wake() {}

func (c *pacedConn) SendStatus(_ context.Context, _, flush pglogrepl.LSN, _ bool) error {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.pending) > 0 && c.pending[0].end <= flush {
		c.lat = append(c.lat, now.Sub(c.pending[0].at))
		c.pending = c.pending[1:]
	}
	if flush > c.acked {
		c.acked = flush
		select {
		case c.ackC <- struct{}{}:
		default:
		}
	}
	return nil
}

func (c *pacedConn) Close(context.Context) error { return nil }

// drained waits until every transaction sent so far, and every one still
// to be sent, is acknowledged.
func (c *pacedConn) drained(b *testing.B, grace time.Duration, ended <-chan error) {
	for {
		c.mu.Lock()
		done := len(c.pending) == 0 && (c.until.IsZero() || time.Now().After(c.until))
		end := c.until
		c.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(end.Add(grace)) && !end.IsZero() {
			if os.Getenv("DELTABUS_COST_LOG") != "" {
				_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
			}
			c.mu.Lock()
			n, first, acked := len(c.pending), c.pending[0].end, c.acked
			c.mu.Unlock()
			b.Fatalf("%d transactions (the first ending at %s) not acknowledged %v after the load ended; acknowledged %s", n, first, grace, acked)
		}
		select {
		case <-c.ackC:
		case err := <-ended:
			b.Fatalf("the session ended: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *pacedConn) latencies() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.lat)
}
