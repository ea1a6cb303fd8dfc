// Package coop lets long CPU work in the background share one P with the
// goroutines that wait on the network.
//
// The relay runs Go on one P beside the database (relay.ShareCores). With
// one P, runtime.Gosched lets goroutines already runnable go first (a
// commit woken from an fsync), but not one whose socket has become
// readable: the scheduler polls the network only when it has nothing
// runnable, or every 10 ms from sysmon. A goroutine that Goscheds between
// chunks of work is always runnable, so a replication stream's next
// message waits up to 10 ms behind it. A Yielder also parks its goroutine
// now and then, which lets the scheduler poll the network.
package coop

import (
	"runtime"
	"time"
)

// ParkEvery is how much of its work a Yielder does between two parks: the
// longest a goroutine woken by the network waits behind it.
const ParkEvery = 2 * time.Millisecond

// park is how long a park asks to sleep. The scheduler polls the network
// at once when nothing else is runnable; with nothing to do it waits for
// the timer, which on Linux is at least a millisecond.
const park = 20 * time.Microsecond

// A Yielder is one goroutine's yields; its zero value is ready.
type Yielder struct {
	last time.Time
}

// Yield gives the P to the other runnable goroutines and, if ParkEvery
// has passed since the last park, parks briefly so that goroutines waiting
// on the network run too.
func (y *Yielder) Yield() {
	now := time.Now()
	if y.last.IsZero() {
		y.last = now
	}
	if now.Sub(y.last) < ParkEvery {
		runtime.Gosched()
		return
	}
	time.Sleep(park)
	y.last = time.Now()
}
