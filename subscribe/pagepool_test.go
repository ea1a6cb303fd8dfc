package subscribe

import (
	"bytes"
	"testing"
)

// TestPagePoolReusesClearedBuffers: a freed buffer comes back for a size
// of its class, cleared; odd sizes and oversized buffers are not kept.
func TestPagePoolReusesClearedBuffers(t *testing.T) {
	p := newPagePool()
	b := p.Allocate(5000)
	if len(b) != 5000 || cap(b) != 8192 {
		t.Fatalf("Allocate(5000): len %d cap %d, want 5000 and 8192", len(b), cap(b))
	}
	for i := range b {
		b[i] = 0xff
	}
	p.Free(b)
	c := p.Allocate(8000)
	if &c[0] != &b[0] {
		t.Fatal("a freed buffer of the class was not reused")
	}
	if !bytes.Equal(c, make([]byte, 8000)) {
		t.Fatal("a reused buffer was not cleared")
	}
	g := p.Reallocate(8192, c[:100])
	if &g[0] != &c[0] || !bytes.Equal(g[100:], make([]byte, 8092)) {
		t.Fatal("Reallocate within the capacity must keep the buffer and clear the new part")
	}
	g[0] = 7
	h := p.Reallocate(9000, g)
	if len(h) != 9000 || h[0] != 7 || cap(h) != 16384 {
		t.Fatalf("Reallocate beyond the capacity: len %d cap %d first %d", len(h), cap(h), h[0])
	}
	p.Free(make([]byte, 5000)) // not a pooled size: dropped
	p.Free(make([]byte, 1<<27))
	if p.bytes != 8192 { // g, freed by the Reallocate
		t.Fatalf("pool holds %d bytes, want 8192", p.bytes)
	}
	if z := p.Allocate(0); len(z) != 0 {
		t.Fatal("Allocate(0) must be empty")
	}
}

// TestPagePoolRawKeepsBytes: a raw pool hands reused buffers out as they
// were (page readers overwrite them); turned back, it clears them again.
func TestPagePoolRawKeepsBytes(t *testing.T) {
	p := newPagePool()
	b := p.Allocate(5000)
	for i := range b {
		b[i] = 0xff
	}
	p.Free(b)
	p.setRaw(true)
	c := p.Allocate(6000)
	if &c[0] != &b[0] || c[4999] != 0xff {
		t.Fatal("a raw pool cleared (or did not reuse) a buffer")
	}
	g := p.Reallocate(8000, c)
	if &g[0] != &c[0] || len(g) != 8000 {
		t.Fatal("Reallocate within the capacity must keep the buffer")
	}
	p.Free(g)
	p.setRaw(false)
	if d := p.Allocate(7000); &d[0] != &b[0] || !bytes.Equal(d, make([]byte, 7000)) {
		t.Fatal("a pool no longer raw must clear a reused buffer")
	}
	var nilPool *pagePool
	nilPool.setRaw(true) // no pool: nothing to do
}
