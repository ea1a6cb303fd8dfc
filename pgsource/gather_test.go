package pgsource

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestGatherConnReadsInBatches sends 200 small messages 50 µs apart, as a
// walsender sends decoded changes, and reads them through gatherConn: every
// byte arrives in order, in far fewer reads than messages.
func TestGatherConnReadsInBatches(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const msgs, size = 200, 100
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		writeNumbered(c, msgs, size, 50*time.Microsecond)
	}()
	dial := dialGathering((&net.Dialer{}).DialContext, streamGather)
	c, err := dial(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, streamGather.buffer)
	var got []byte
	reads := 0
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		reads++
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != msgs*size {
		t.Fatalf("read %d bytes, want %d", len(got), msgs*size)
	}
	checkNumbered(t, got, size)
	if reads > msgs/4 {
		t.Fatalf("%d reads for %d messages: reads did not gather", reads, msgs)
	}
	t.Logf("%d messages in %d reads", msgs, reads)
}

// TestGatherConnKeepsDeadlines: a read deadline still ends a read at once
// (the relay wakes on it, and cancellation sets it in the past).
func TestGatherConnKeepsDeadlines(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte("x"))
			time.Sleep(time.Second)
			c.Close()
		}
	}()
	c, err := dialGathering((&net.Dialer{}).DialContext, streamGather)(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, streamGather.buffer)
	if _, err := c.Read(buf); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	start := time.Now()
	_, err = c.Read(buf)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after the deadline: %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Fatalf("read returned %s after a 20 ms deadline", d)
	}
}

// writeNumbered writes count pieces of size bytes, piece i all bytes
// byte(i), gap apart (spinning: time.Sleep would take a millisecond).
func writeNumbered(w io.Writer, count, size int, gap time.Duration) error {
	piece := make([]byte, size)
	for i := range count {
		for j := range piece {
			piece[j] = byte(i)
		}
		if _, err := w.Write(piece); err != nil {
			return err
		}
		for t := time.Now(); time.Since(t) < gap; {
		}
	}
	return nil
}

// checkNumbered fails t unless got is writeNumbered's pieces of size
// bytes, in order.
func checkNumbered(t *testing.T, got []byte, size int) {
	t.Helper()
	for i, b := range got {
		if b != byte(i/size) {
			t.Fatalf("byte %d is %d, want %d: out of order", i, b, byte(i/size))
		}
	}
}

// gatherPair returns a client connection gathering by g and the server's
// end.
func gatherPair(t *testing.T, g gather) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	c, err := dialGathering((&net.Dialer{}).DialContext, g)(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv := <-accepted
	if srv == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); srv.Close() })
	return c, srv
}

// TestGatherConnSmallMessageArrives: while gathering (the socket's
// low-water mark raised), a message smaller than the mark still arrives
// within a few milliseconds, with no deadline set by the caller.
func TestGatherConnSmallMessageArrives(t *testing.T) {
	c, srv := gatherPair(t, streamGather)
	buf := make([]byte, streamGather.buffer)
	srv.Write([]byte("first"))
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "first" {
		t.Fatalf("first read: %q, %v", buf[:n], err)
	}
	for i := range 20 { // each read after a short one gathers
		go func() {
			time.Sleep(3 * time.Millisecond)
			srv.Write([]byte("small"))
		}()
		start := time.Now()
		n, err := c.Read(buf)
		if err != nil || string(buf[:n]) != "small" {
			t.Fatalf("read %d: %q, %v", i, buf[:n], err)
		}
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Fatalf("read %d: a small message took %s to arrive", i, d)
		}
	}
}

// TestGatherConnInterrupted: a deadline set in the past from another
// goroutine (how cancellation interrupts a read) ends a gathering read at
// once; a later deadline is then honoured as set.
func TestGatherConnInterrupted(t *testing.T) {
	c, srv := gatherPair(t, streamGather)
	buf := make([]byte, streamGather.buffer)
	srv.Write([]byte("x"))
	if _, err := c.Read(buf); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		c.SetReadDeadline(time.Unix(1, 0))
	}()
	start := time.Now()
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("interrupted read: %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("interrupted read returned after %s", d)
	}
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	start = time.Now()
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read with nothing to read: %v, want a deadline error", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("read returned after %s, before its 300 ms deadline", d)
	}
	c.SetReadDeadline(time.Time{})
	srv.Write([]byte("y"))
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "y" {
		t.Fatalf("read after the deadline was cleared: %q, %v", buf[:n], err)
	}
}

// TestGatherBulkReadsLargeChunks sends 4 MiB in 8 KiB writes 20 µs apart,
// as a server flushes a COPY, then 100 bytes more and holds the
// connection open: every byte arrives in order, in large reads, and the
// last short piece arrives by the gathering wait (the low-water mark is
// never reached and the connection stays open). The CPU it saves is
// measured by BenchmarkBootstrap (cpu_ns/row): an in-process writer does
// not wake the reader per write as a server does.
func TestGatherBulkReadsLargeChunks(t *testing.T) {
	const flushes, size, tail = 512, 8 << 10, 100
	c, srv := gatherPair(t, bulkGather)
	go func() {
		if writeNumbered(srv, flushes, size, 20*time.Microsecond) == nil { // slower than the reader
			srv.Write(make([]byte, tail)) // and the connection stays open
		}
	}()
	buf := make([]byte, bulkGather.buffer)
	var got []byte
	reads := 0
	for len(got) < flushes*size+tail {
		c.SetReadDeadline(time.Now().Add(5 * time.Second)) // a hang fails instead of blocking
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("after %d bytes: %v", len(got), err)
		}
		got = append(got, buf[:n]...)
		reads++
	}
	checkNumbered(t, got[:flushes*size], size)
	if max := flushes * size / (32 << 10); reads > max {
		t.Fatalf("%d reads for %d bytes in 8 KiB flushes; want at most %d", reads, flushes*size, max)
	}
	t.Logf("%d bytes in %d reads", len(got), reads)
}
