//go:build linux

package relay

import (
	"fmt"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// YieldOnWakeup puts every thread of the process under SCHED_BATCH, unless
// the process was started under a policy other than the default
// (SCHED_OTHER): an operator's choice (systemd's CPUSchedulingPolicy=,
// chrt) is kept.
//
// SCHED_BATCH keeps the relay's share of the CPU (the same nice level and
// weight: a relay that needs a core still gets it) but its threads no
// longer preempt the task running on a core when they wake; they wait for
// that task's time slice to end or for it to sleep. A streaming relay
// wakes thousands of times a second (socket reads, timers, the
// committer), and under SCHED_OTHER each wake-up on the core where the
// walsender or a backend runs preempted it: on 2 cores with a CPU hog, the
// relay's threads took 0.48 s of the walsender's core in a 7 s drain where
// pg_recvlogical took 0.22 s (perf sched). Side by side, two runs of three
// rounds each, beside the hog: single-row drains went from 0.88 to 1.02
// and from 0.76 to 0.90 of pg_recvlogical's rate, 1,000-row drains from
// 0.88 to 0.97, and the relay's CPU per event from 11.6 to 6.6 and 12.2 to
// 7.1 µs (single-row), 4.2 to 3.1 µs (1,000-row): it reads more per
// wake-up. Unloaded drains kept their ratios, and the latency at 2,000
// tx/s stayed where it was (p50 26 / 25 ms, p99 68 / 75 ms).
//
// Threads the Go runtime creates later inherit the policy (Linux copies it
// on clone), and the nice level is kept (sched_setscheduler keeps it).
func YieldOnWakeup() error {
	if p, err := schedPolicy(0); err != nil {
		return fmt.Errorf("read the scheduling policy: %w", err)
	} else if p != unix.SCHED_NORMAL {
		return nil // chosen by the operator
	}
	// Threads started while the list is walked by one not yet moved would
	// be missed: walk it until a pass moves none.
	for range 5 {
		moved, err := batchAllThreads()
		if err != nil || moved == 0 {
			return err
		}
	}
	return nil
}

// schedPolicyName names the calling thread's scheduling policy, for the
// streaming log line.
func schedPolicyName() string {
	p, err := schedPolicy(0)
	if err != nil {
		return "unknown"
	}
	return policyName(p)
}

// batchAllThreads moves every thread still under SCHED_OTHER to SCHED_BATCH
// and returns how many it moved. A thread that exited meanwhile is skipped.
func batchAllThreads() (int, error) {
	tids, err := threadIDs()
	if err != nil {
		return 0, err
	}
	moved := 0
	for _, tid := range tids {
		p, err := schedPolicy(tid)
		if err == unix.ESRCH {
			continue
		} else if err != nil {
			return moved, fmt.Errorf("read the scheduling policy of thread %d: %w", tid, err)
		}
		if p != unix.SCHED_NORMAL {
			continue
		}
		switch err := setSchedPolicy(tid, unix.SCHED_BATCH); err {
		case nil:
			moved++
		case unix.ESRCH:
		default:
			return moved, fmt.Errorf("set SCHED_BATCH on thread %d: %w", tid, err)
		}
	}
	return moved, nil
}

// threadIDs lists the threads of the process.
func threadIDs() ([]int, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("list the process's threads: %w", err)
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// setSchedPolicy puts thread tid under a policy without a priority
// (SCHED_OTHER, SCHED_BATCH, SCHED_IDLE); sched_setscheduler keeps its
// nice level.
func setSchedPolicy(tid, policy int) error {
	var param struct{ priority int32 } // sched_param
	if _, _, errno := unix.RawSyscall(unix.SYS_SCHED_SETSCHEDULER, uintptr(tid), uintptr(policy), uintptr(unsafe.Pointer(&param))); errno != 0 {
		return errno
	}
	return nil
}

// schedPolicy returns the scheduling policy of thread tid (0: the calling
// thread), without the reset-on-fork flag.
func schedPolicy(tid int) (int, error) {
	p, _, errno := unix.RawSyscall(unix.SYS_SCHED_GETSCHEDULER, uintptr(tid), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(p) &^ unix.SCHED_RESET_ON_FORK, nil
}

func policyName(p int) string {
	switch p {
	case unix.SCHED_NORMAL:
		return "other"
	case unix.SCHED_BATCH:
		return "batch"
	case unix.SCHED_IDLE:
		return "idle"
	case unix.SCHED_FIFO:
		return "fifo"
	case unix.SCHED_RR:
		return "rr"
	case unix.SCHED_DEADLINE:
		return "deadline"
	}
	return strconv.Itoa(p)
}
