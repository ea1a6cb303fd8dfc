package faultproxy

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
)

// TCPMode is what a TCP proxy does with the bytes of its connections.
type TCPMode int

const (
	// TCPPass forwards every byte both ways.
	TCPPass TCPMode = iota
	// BlackHole forwards nothing, on open connections and on new ones
	// (accepted, then held), and closes nothing: a connection's peer sees
	// silence, as after a partition, a lost NAT or load-balancer entry, or
	// a frozen host. What was read but not forwarded is forwarded when
	// the mode is back to TCPPass, unless the connection was lost.
	BlackHole
)

// TCPFault is a TCP proxy's behaviour. The zero TCPFault passes.
type TCPFault struct {
	Mode TCPMode
	// Lose, with BlackHole, makes every connection open when Set is
	// called, or accepted while the fault lasts, silent for good: it
	// never forwards again, even after TCPPass, and is never closed
	// (until the proxy is). The peer's kernel state is gone, as a lost
	// NAT entry leaves it. Only new connections pass afterwards.
	Lose bool
}

// TCPStats counts a TCP proxy's connections.
type TCPStats struct {
	Accepted int // connections accepted
	Open     int // connections open now
	Lost     int // connections lost (TCPFault.Lose)
}

// TCP is a running fault-injecting TCP proxy (for PostgreSQL's protocol,
// or any other). Its methods are safe for concurrent use.
type TCP struct {
	target string
	ln     net.Listener

	mu     sync.Mutex
	cond   *sync.Cond // broadcast on Set and Close
	fault  TCPFault
	pipes  map[*pipe]struct{}
	stats  TCPStats
	closed bool
	wg     sync.WaitGroup
}

// pipe is one proxied connection.
type pipe struct {
	client, server net.Conn
	lost           bool
	once           sync.Once
}

func (c *pipe) close() {
	c.once.Do(func() {
		c.client.Close()
		c.server.Close()
	})
}

// NewTCP starts a TCP proxy to target (host:port) for the test and closes
// it when the test ends.
func NewTCP(t testing.TB, target string) *TCP {
	t.Helper()
	p, err := StartTCP(target)
	if err != nil {
		t.Fatalf("faultproxy: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// StartTCP starts a TCP proxy on a free port of 127.0.0.1 to target.
func StartTCP(target string) (*TCP, error) {
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("target %q: want host:port", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	p := &TCP{target: target, ln: ln, pipes: map[*pipe]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's host:port.
func (p *TCP) Addr() string { return p.ln.Addr().String() }

// Set replaces the fault; it applies to every byte not yet forwarded.
func (p *TCP) Set(f TCPFault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault = f
	if f.Mode == BlackHole && f.Lose {
		for c := range p.pipes {
			p.loseLocked(c)
		}
	}
	p.cond.Broadcast()
}

func (p *TCP) loseLocked(c *pipe) {
	if !c.lost {
		c.lost = true
		p.stats.Lost++
	}
}

// Stats returns the counts so far.
func (p *TCP) Stats() TCPStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Open = len(p.pipes)
	return s
}

// Close stops the proxy and closes every connection, lost ones included.
func (p *TCP) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for c := range p.pipes {
		c.close()
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *TCP) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		// The target is reached at once; the fault decides what flows.
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		c := &pipe{client: client, server: server}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.close()
			return
		}
		p.stats.Accepted++
		if p.fault.Mode == BlackHole && p.fault.Lose {
			p.loseLocked(c)
		}
		p.pipes[c] = struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pump(c, server, client)
		go p.pump(c, client, server)
	}
}

// pump copies src to dst while the fault lets it: it reads only when it
// may forward (so a black hole fills the kernel's buffers and the sender
// blocks, as over a dead path), and holds what it read until it may.
// An end of src (close, error) is forwarded as a close of both sides
// under the same rule: a lost connection is never closed.
func (p *TCP) pump(c *pipe, dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		if !p.await(c) {
			return
		}
		n, err := src.Read(buf)
		if n > 0 {
			if !p.await(c) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil && err == nil {
				err = werr
			}
		}
		if err != nil {
			if p.await(c) || errors.Is(err, net.ErrClosed) {
				p.drop(c)
			}
			return
		}
	}
}

// await waits until c may forward, and reports false once the proxy is
// closed.
func (p *TCP) await(c *pipe) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed && (c.lost || p.fault.Mode != TCPPass) {
		p.cond.Wait()
	}
	return !p.closed
}

func (p *TCP) drop(c *pipe) {
	c.close()
	p.mu.Lock()
	delete(p.pipes, c)
	p.mu.Unlock()
}
