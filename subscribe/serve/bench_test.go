package serve_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe/members"
	"github.com/deltabus/deltabus/subscribe/members/memberstest"
	"github.com/deltabus/deltabus/subscribe/serve"
)

// BenchmarkMembers measures, side by side in one run, a group whose
// handler takes 5 ms per event:
//
//   - events/s with 1, 2, 4 and 8 members over HTTP against a real `relay
//     serve` process (members that receive up to 10 events, handle them
//     one by one and acknowledge them in one request, as the Python and
//     TypeScript examples do), and with the Go SDK (members.Consume over
//     the groups in process); the goal is 0.8 x members x 200 ev/s, so
//     each figure is also reported as a ratio of it; per-key order is
//     checked on every run;
//   - CPU per delivered event of the serving process (during the 8-member
//     HTTP run) against `relay consume` alone reading the same topic;
//   - the serving process's peak memory with 10,000 events in flight over
//     100,000 distinct keys (every one of them read and held).
//
// The machine is shared: run it with -benchtime 1x (scripts/bench.sh).
func BenchmarkMembers(b *testing.B) {
	relay := buildRelay(b)
	dir := b.TempDir()
	root, err := storage.NewLocal(dir)
	if err != nil {
		b.Fatal(err)
	}
	tp := memberstest.NewTopic(b, root, "bench")
	for range 20 {
		tp.CommitKeyed(1000, 5000)
	}
	runFor := benchSeconds()
	for range b.N {
		srv := startRelayServe(b, relay, "file://"+dir)
		for _, m := range []int{1, 2, 4, 8} {
			rate, cpu := httpRun(b, srv, tp, m, runFor)
			b.ReportMetric(rate, fmt.Sprintf("ev/s-http-%dm", m))
			b.ReportMetric(rate/(0.8*float64(m)*200), fmt.Sprintf("goal-http-%dm", m))
			if m == 8 {
				b.ReportMetric(cpu, "cpu-µs/ev-serve")
			}
		}
		srv.stop()
		for _, m := range []int{1, 2, 4, 8} {
			rate := sdkRun(b, root, tp, m, runFor)
			b.ReportMetric(rate, fmt.Sprintf("ev/s-sdk-%dm", m))
			b.ReportMetric(rate/(0.8*float64(m)*200), fmt.Sprintf("goal-sdk-%dm", m))
		}
		consumeCPU := consumeRun(b, relay, "file://"+dir, len(tp.Order))
		b.ReportMetric(consumeCPU, "cpu-µs/ev-consume")
		b.ReportMetric(memoryRun(b, relay), "MiB-10k-in-flight-100k-keys")
	}
}

// benchSeconds is how long each throughput run lasts
// (DELTABUS_MEMBERS_SECONDS, default 5).
func benchSeconds() time.Duration {
	if v, err := strconv.Atoi(os.Getenv("DELTABUS_MEMBERS_SECONDS")); err == nil && v > 0 {
		return time.Duration(v) * time.Second
	}
	return 5 * time.Second
}

func buildRelay(b *testing.B) string {
	p := filepath.Join(b.TempDir(), "relay")
	if out, err := exec.Command("go", "build", "-o", p, "github.com/deltabus/deltabus/cmd/relay").CombinedOutput(); err != nil {
		b.Fatalf("go build relay: %v\n%s", err, out)
	}
	return p
}

// serveProc is a running `relay serve`.
type serveProc struct {
	cmd *exec.Cmd
	url string
}

func startRelayServe(b *testing.B, relay, store string) *serveProc {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(relay, "serve", "--addr", addr, "--store", store, "--log-level", "error")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &serveProc{cmd: cmd, url: "http://" + addr}
	b.Cleanup(p.stop)
	for deadline := time.Now().Add(30 * time.Second); ; {
		if resp, err := http.Get(p.url + "/healthz"); err == nil {
			resp.Body.Close()
			return p
		}
		if time.Now().After(deadline) {
			b.Fatal("relay serve did not come up")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *serveProc) stop() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		_ = p.cmd.Wait()
	}
}

// procCPU is the process's user+system CPU time so far.
func procCPU(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// procPeakMiB is the process's peak resident memory (VmHWM).
func procPeakMiB(b *testing.B, pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024
		}
	}
	b.Fatal("no VmHWM")
	return 0
}

// timedMembers runs m members for d after a warm-up second and returns
// the events acknowledged per second in d; member runs one member until
// its context ends, counting acknowledged events into n.
func timedMembers(m int, d time.Duration, member func(ctx context.Context, i int, n *atomic.Int64)) float64 {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	var wg sync.WaitGroup
	for i := range m {
		wg.Add(1)
		go func() { defer wg.Done(); member(ctx, i, &n) }()
	}
	time.Sleep(time.Second)
	start, from := time.Now(), n.Load()
	time.Sleep(d)
	rate := float64(n.Load()-from) / time.Since(start).Seconds()
	cancel()
	wg.Wait()
	return rate
}

const handleTime = 5 * time.Millisecond

// benchMax is what each receive asks for: a batch whose handling (250 ms)
// dwarfs the two durable writes of a receive and an ack.
const benchMax = 50

// httpRun runs m HTTP members of a new group; it returns events/s and the
// server's CPU per acknowledged event.
func httpRun(b *testing.B, srv *serveProc, tp *memberstest.Topic, m int, d time.Duration) (rate, cpuPerEvent float64) {
	c := serve.NewClient(srv.url, "", nil)
	group := "http-" + uuid.NewString()[:8]
	rec := memberstest.NewRecorder()
	cpu0 := procCPU(b, srv.cmd.Process.Pid)
	var total atomic.Int64
	rate = timedMembers(m, d, func(ctx context.Context, i int, n *atomic.Int64) {
		name := fmt.Sprintf("m%d", i)
		for ctx.Err() == nil {
			msgs, err := c.Receive(ctx, group, "bench", members.ReceiveRequest{Member: name, Max: benchMax, Wait: time.Second})
			if err != nil {
				continue
			}
			ids := make([]string, len(msgs))
			for k, msg := range msgs {
				rec.Delivered(name, msg)
				time.Sleep(handleTime)
				ids[k] = msg.AckID
			}
			if len(ids) == 0 {
				continue
			}
			sent := time.Now()
			res, err := c.Ack(context.Background(), group, "bench", ids)
			if err != nil || res.Done != len(ids) {
				continue
			}
			for _, msg := range msgs {
				rec.Acked(msg, sent)
			}
			n.Add(int64(len(ids)))
			total.Add(int64(len(ids)))
		}
	})
	cpu := procCPU(b, srv.cmd.Process.Pid) - cpu0
	rec.CheckOrder(b, tp.Order, tp.Keys)
	return rate, float64(cpu.Microseconds()) / float64(max(total.Load(), 1))
}

// sdkRun runs m members.Consume members over the groups in process.
func sdkRun(b *testing.B, root storage.Store, tp *memberstest.Topic, m int, d time.Duration) float64 {
	gs := members.New(root, members.Options{})
	defer gs.Close()
	group := "sdk-" + uuid.NewString()[:8]
	var mu sync.Mutex
	last := map[string]int{} // key -> index in commit order of the last event handled
	pos := make(map[string]int, len(tp.Order))
	for i, id := range tp.Order {
		pos[id] = i
	}
	var bad string
	return timedMembers(m, d, func(ctx context.Context, i int, n *atomic.Int64) {
		_ = members.Consume(ctx, gs, group, "bench", func(_ context.Context, msg *members.Message) error {
			time.Sleep(handleTime)
			mu.Lock()
			k, p := msg.Event.Key, pos[msg.Event.ID]
			if prev, ok := last[k]; ok && p <= prev && bad == "" {
				bad = fmt.Sprintf("key %s: event %d handled after event %d", k, p, prev)
				b.Error(bad)
			}
			last[k] = p
			mu.Unlock()
			n.Add(1)
			return nil
		}, members.ConsumeOptions{Member: fmt.Sprintf("m%d", i), Max: benchMax, Wait: time.Second})
	})
}

// consumeRun is the CPU per event of `relay consume` reading the topic
// to its end.
func consumeRun(b *testing.B, relay, store string, events int) float64 {
	cmd := exec.Command(relay, "consume", "--topic", "bench", "--group", "consume-"+uuid.NewString()[:8], "--store", store)
	if err := cmd.Run(); err != nil {
		b.Fatalf("relay consume: %v", err)
	}
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return float64(cpu.Microseconds()) / float64(events)
}

// memoryRun holds 10,000 events in flight over a topic of 100,000
// distinct keys and returns the serving process's peak memory in MiB.
func memoryRun(b *testing.B, relay string) float64 {
	dir := b.TempDir()
	root, err := storage.NewLocal(dir)
	if err != nil {
		b.Fatal(err)
	}
	tp := memberstest.NewTopic(b, root, "wide")
	for c := range 10 {
		evs := make([]memberstest.Event, 10_000)
		for i := range evs {
			evs[i] = memberstest.Event{ID: uuid.NewString(), Key: fmt.Sprintf("customer-%d-%d", c, i)}
		}
		tp.Commit(evs...)
	}
	srv := startRelayServe(b, relay, "file://"+dir)
	defer srv.stop()
	c := serve.NewClient(srv.url, "", nil)
	held := 0
	for held < 10_000 {
		msgs, err := c.Receive(context.Background(), "mem", "wide", members.ReceiveRequest{Member: "holder", Max: 1000,
			Wait: 5 * time.Second, Visibility: 10 * time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		held += len(msgs)
	}
	// Let the reader fill the index with every event of the topic.
	time.Sleep(3 * time.Second)
	return procPeakMiB(b, srv.cmd.Process.Pid)
}
