package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

type client struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialProxy(t *testing.T, p *TCP) *client {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t: t, c: c, r: bufio.NewReader(c)}
}

// echo sends a line and returns what came back within wait, or "" with the
// read's error.
func (c *client) echo(line string, wait time.Duration) (string, error) {
	c.t.Helper()
	if _, err := io.WriteString(c.c, line+"\n"); err != nil {
		return "", err
	}
	return c.read(wait)
}

func (c *client) read(wait time.Duration) (string, error) {
	c.c.SetReadDeadline(time.Now().Add(wait))
	s, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return s[:len(s)-1], nil
}

func silent(t *testing.T, what string, got string, err error) {
	t.Helper()
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: got %q, %v; want silence (a read timeout, no data, no close)", what, got, err)
	}
}

func TestTCPPassAndBlackHoleAndBack(t *testing.T) {
	p := NewTCP(t, echoServer(t))
	a := dialProxy(t, p)
	if got, err := a.echo("one", 5*time.Second); got != "one" {
		t.Fatalf("pass: %q, %v", got, err)
	}
	p.Set(TCPFault{Mode: BlackHole})
	got, err := a.echo("two", 300*time.Millisecond)
	silent(t, "an open connection in a black hole", got, err)
	b := dialProxy(t, p) // accepted, then held
	got, err = b.echo("three", 300*time.Millisecond)
	silent(t, "a new connection in a black hole", got, err)
	p.Set(TCPFault{})
	if got, err := a.read(5 * time.Second); got != "two" {
		t.Fatalf("after the black hole, the held line: %q, %v", got, err)
	}
	if got, err := b.read(5 * time.Second); got != "three" {
		t.Fatalf("after the black hole, the new connection's held line: %q, %v", got, err)
	}
	if s := p.Stats(); s.Accepted != 2 || s.Open != 2 || s.Lost != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestTCPLoseKeepsOldConnectionsDead: connections lost in a black hole stay
// silent, and open, after the proxy passes again; new ones pass.
func TestTCPLoseKeepsOldConnectionsDead(t *testing.T) {
	p := NewTCP(t, echoServer(t))
	a := dialProxy(t, p)
	if got, err := a.echo("one", 5*time.Second); got != "one" {
		t.Fatalf("pass: %q, %v", got, err)
	}
	p.Set(TCPFault{Mode: BlackHole, Lose: true})
	during := dialProxy(t, p)
	waitFor(t, func() bool { return p.Stats().Accepted == 2 })
	p.Set(TCPFault{})
	got, err := a.echo("two", 500*time.Millisecond)
	silent(t, "a lost connection after the partition", got, err)
	got, err = during.echo("x", 300*time.Millisecond)
	silent(t, "a connection accepted during the partition", got, err)
	b := dialProxy(t, p)
	if got, err := b.echo("three", 5*time.Second); got != "three" {
		t.Fatalf("a new connection after the partition: %q, %v", got, err)
	}
	if s := p.Stats(); s.Lost != 2 {
		t.Fatalf("stats %+v, want 2 lost", s)
	}
	// A lost connection's close is not forwarded either; Close ends it.
	a.c.Close()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestTCPCloseIsForwarded(t *testing.T) {
	p := NewTCP(t, echoServer(t))
	a := dialProxy(t, p)
	if got, err := a.echo("one", 5*time.Second); got != "one" {
		t.Fatalf("pass: %q, %v", got, err)
	}
	a.c.(*net.TCPConn).CloseWrite() // the echo server sees EOF and closes
	if _, err := a.read(5 * time.Second); err != io.EOF {
		t.Fatalf("after a half close: %v, want EOF", err)
	}
}
