package coop

import (
	"io"
	"net"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkWakeBehindBackgroundWork measures, on one P, how long a
// goroutine blocked on a socket waits for the P once a byte arrives,
// while another goroutine does CPU work in chunks of about 100 µs and
// yields between them: by runtime.Gosched alone (the scheduler polls the
// network only from sysmon, every 10 ms), and by a Yielder.
func BenchmarkWakeBehindBackgroundWork(b *testing.B) {
	for _, c := range []struct {
		name  string
		yield func(*Yielder)
	}{
		{"gosched", func(*Yielder) { runtime.Gosched() }},
		{"yielder", (*Yielder).Yield},
	} {
		b.Run(c.name, func(b *testing.B) { benchWake(b, c.yield) })
	}
}

func benchWake(b *testing.B, yield func(*Yielder)) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	w, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	r, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()

	var stop atomic.Bool
	spun := make(chan struct{})
	go func() { // the background work
		defer close(spun)
		var y Yielder
		for !stop.Load() {
			for t := time.Now(); time.Since(t) < 100*time.Microsecond; {
			}
			yield(&y)
		}
	}()
	var sent atomic.Int64
	woke := make(chan time.Duration)
	go func() { // the goroutine waiting on the network
		buf := make([]byte, 1)
		for {
			if _, err := io.ReadFull(r, buf); err != nil {
				close(woke)
				return
			}
			woke <- time.Duration(time.Now().UnixNano() - sent.Load())
		}
	}()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		time.Sleep(3 * time.Millisecond) // a timer: runs before the runnable work
		sent.Store(time.Now().UnixNano())
		if _, err := w.Write([]byte{1}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, <-woke)
	}
	b.StopTimer()
	stop.Store(true)
	<-spun
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-wake-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-wake-µs")
}
