//go:build linux

package relay

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// The scheduling tests change the policy of every thread of a process, so
// each runs in a child process of its own: this test binary again, running
// TestSchedChild with schedChildEnv naming what the child checks.
const schedChildEnv = "DELTABUS_SCHED_TEST_CHILD"

// TestSchedChild is the child of the tests below; in a plain run it has
// nothing to do.
func TestSchedChild(t *testing.T) {
	var err error
	switch os.Getenv(schedChildEnv) {
	case "":
		return
	case "batch":
		err = schedChild(unix.SCHED_NORMAL, unix.SCHED_BATCH)
	case "kept":
		err = schedChild(unix.SCHED_IDLE, unix.SCHED_IDLE)
	default:
		err = fmt.Errorf("unknown %s", schedChildEnv)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// schedChild starts under policy start on every thread, with a nice level
// raised on some, calls YieldOnWakeup, starts more threads, and checks
// that every thread runs under want at the nice level it had.
func schedChild(start, want int) error {
	if err := unix.Setpriority(unix.PRIO_PROCESS, 0, 3); err != nil { // this thread; the ones it starts inherit it
		return fmt.Errorf("setpriority: %w", err)
	}
	lockedThreads(4, func() {})
	if start != unix.SCHED_NORMAL {
		if err := setEveryThread(start); err != nil {
			return fmt.Errorf("start under %d: %w", start, err)
		}
	}
	nice := map[int]int{}
	for _, tid := range threads() {
		nice[tid] = threadNice(tid)
	}
	if err := YieldOnWakeup(); err != nil {
		return fmt.Errorf("YieldOnWakeup: %w", err)
	}
	var bad []string
	lockedThreads(8, func() { // threads started afterwards inherit it
		if p, err := schedPolicy(0); err != nil || p != want {
			bad = append(bad, fmt.Sprintf("new thread: policy %d (%v)", p, err))
		}
	})
	for _, tid := range threads() {
		p, err := schedPolicy(tid)
		if err == unix.ESRCH {
			continue
		}
		if err != nil || p != want {
			bad = append(bad, fmt.Sprintf("thread %d: policy %d (%v), want %d", tid, p, err, want))
		}
		if was, ok := nice[tid]; ok && threadNice(tid) != was && threadNice(tid) != -1 {
			bad = append(bad, fmt.Sprintf("thread %d: nice %d, was %d", tid, threadNice(tid), was))
		}
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// lockedThreads runs f on n goroutines locked to their threads at once,
// which makes the runtime start threads until n are there.
func lockedThreads(n int, f func()) {
	var ready, done sync.WaitGroup
	var mu sync.Mutex
	ready.Add(n)
	release := make(chan struct{})
	for range n {
		done.Add(1)
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			ready.Done()
			<-release
			mu.Lock()
			f()
			mu.Unlock()
		}()
	}
	ready.Wait()
	close(release)
	done.Wait()
}

func setEveryThread(policy int) error {
	tids, err := threadIDs()
	if err != nil {
		return err
	}
	for _, tid := range tids {
		if err := setSchedPolicy(tid, policy); err != nil && err != unix.ESRCH {
			return err
		}
	}
	return nil
}

func threads() []int {
	tids, _ := threadIDs()
	return tids
}

// threadNice is a thread's nice level as getpriority(2) reports it (20 -
// nice), or -1 when the thread is gone.
func threadNice(tid int) int {
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if err != nil {
		return -1
	}
	return prio
}

func runSchedChild(t *testing.T, what string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestSchedChild$", "-test.count", "1")
	cmd.Env = append(os.Environ(), schedChildEnv+"="+what)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child %q: %v\n%s", what, err, out)
	}
}

// TestYieldOnWakeupMovesEveryThread: every thread, the ones running at the
// call and the ones started afterwards, runs under SCHED_BATCH, at the
// nice level it had.
func TestYieldOnWakeupMovesEveryThread(t *testing.T) { runSchedChild(t, "batch") }

// TestYieldOnWakeupKeepsTheOperatorsPolicy: a process started under another
// policy than the default (here SCHED_IDLE, as `chrt --idle` or systemd's
// CPUSchedulingPolicy=idle would) keeps it.
func TestYieldOnWakeupKeepsTheOperatorsPolicy(t *testing.T) { runSchedChild(t, "kept") }
