package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRunThreadsYieldOnWakeup: a streaming `relay run` has every thread
// under SCHED_BATCH (3), says so on its streaming line, and
// --sched-batch=false leaves the default policy (0) on every thread.
func TestRunThreadsYieldOnWakeup(t *testing.T) {
	db := setup(t)
	url, _ := localStore(t)
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + url}
	for _, c := range []struct {
		args   []string
		policy int
		name   string
	}{
		{nil, 3, "batch"},
		{[]string{"--sched-batch=false"}, 0, "other"},
	} {
		p := startRelay(t, env, c.args...)
		waitSlotActive(t, db.DSN, "deltabus", p)
		got := threadPolicies(t, p.cmd.Process.Pid)
		for tid, policy := range got {
			if policy != c.policy {
				t.Errorf("relay run %v: thread %d runs under policy %d, want %d (all: %v)", c.args, tid, policy, c.policy, got)
			}
		}
		if want := "sched=" + c.name; !strings.Contains(p.output(), want) {
			t.Errorf("relay run %v: no %s on the streaming line:\n%s", c.args, want, p.tail())
		}
		if err := p.stop(30 * time.Second); err != nil {
			t.Fatalf("relay run %v: %v\n%s", c.args, err, p.tail())
		}
	}
}

// threadPolicies reads the scheduling policy of each thread of pid
// (field 41 of /proc/PID/task/TID/stat).
func threadPolicies(t *testing.T, pid int) map[int]int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]int{}
	for _, e := range ents {
		b, err := os.ReadFile(dir + "/" + e.Name() + "/stat")
		if err != nil {
			continue // the thread exited
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // from field 3 (state)
		tid, _ := strconv.Atoi(e.Name())
		if got[tid], err = strconv.Atoi(fields[41-3]); err != nil {
			t.Fatalf("thread %d: policy field %q: %v", tid, fields[41-3], err)
		}
	}
	if len(got) < 2 {
		t.Fatalf("pid %d has %d threads", pid, len(got))
	}
	return got
}
