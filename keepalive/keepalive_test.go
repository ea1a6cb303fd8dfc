package keepalive

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestDialerSetsEveryOption(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, o := range []Options{Default, {Idle: 7 * time.Second, Interval: 2 * time.Second, Count: 5, UserTimeout: 1500 * time.Millisecond}} {
		c, err := o.Dialer(time.Second).DialContext(context.Background(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		got, err := Inspect(c)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got != o {
			t.Fatalf("socket has %+v, dialed with %+v", got, o)
		}
	}
}

func TestDialerOff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := Options{Off: true, UserTimeout: 10 * time.Second}.Dialer(0).Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := Inspect(c)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Off || got.UserTimeout != 10*time.Second {
		t.Fatalf("socket has %+v, want keepalives off and a 10s user timeout", got)
	}
}

// TestUnixSocketsAreLeftAlone: TCP options on a unix socket would fail the
// dial (PostgreSQL's default socket directory is a unix socket).
func TestUnixSocketsAreLeftAlone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := Default.Dialer(time.Second).Dial("unix", path)
	if err != nil {
		t.Fatalf("dial a unix socket: %v", err)
	}
	c.Close()
}

// TestUserTimeoutFailsAnUnacknowledgedWrite: a peer that stops
// acknowledging (here: a listener whose backlog never accepts and whose
// receive buffer fills) fails a writer within the user timeout, not the
// kernel's fifteen minutes.
func TestUserTimeoutFailsAnUnacknowledgedWrite(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			peer <- c
		}
	}()
	o := Options{Off: true, UserTimeout: time.Second}
	c, err := o.Dialer(time.Second).Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := <-peer
	defer p.Close()
	// The peer never reads: its receive window closes and the writer's
	// last data stays unacknowledged (Linux counts zero-window probes
	// against the user timeout).
	c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 1<<20)
	began := time.Now()
	for {
		if _, err = c.Write(buf); err != nil {
			break
		}
	}
	took := time.Since(began)
	if !errors.Is(err, syscall.ETIMEDOUT) || took > 10*time.Second {
		t.Fatalf("write failed after %s with %v, want ETIMEDOUT within seconds of the 1s user timeout", took, err)
	}
	t.Logf("write failed after %s: %v", took.Round(time.Millisecond), err)
}
