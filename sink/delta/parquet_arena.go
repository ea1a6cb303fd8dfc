package delta

import (
	"math/bits"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Buffers of 2^arenaMinClass to 2^arenaMaxClass bytes are pooled.
const arenaMinClass, arenaMaxClass = 6, 20

var arenaPools [arenaMaxClass + 1]sync.Pool // of *[]byte, by size class

// parseArena is the memory.Allocator of the page readers of one flat
// checkpoint read: arrow-go gives every column chunk's page reader a 16 KiB
// buffer (and more for its pages), which dominate the cost of reading a
// small checkpoint. The buffers come from pools by power-of-two size and
// go back, all at once, when the read is over (release): the flat reader
// copies every value it keeps out of them, so nothing refers to them then.
// Free is a no-op, so a buffer is never handed out twice within a read.
// Allocations are zeroed and 64-byte aligned, as memory.GoAllocator's.
type parseArena struct {
	used [][]byte
}

var _ memory.Allocator = (*parseArena)(nil)

func (a *parseArena) Allocate(size int) []byte {
	c := max(bits.Len(uint(max(size, 1)-1)), arenaMinClass)
	if c > arenaMaxClass {
		return memory.DefaultAllocator.Allocate(size)
	}
	if p, ok := arenaPools[c].Get().(*[]byte); ok {
		b := (*p)[:size]
		clear(b)
		a.used = append(a.used, b)
		return b
	}
	b := make([]byte, size, 1<<c) // power-of-two classes are size-aligned
	a.used = append(a.used, b)
	return b
}

func (a *parseArena) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		old := len(b)
		b = b[:size]
		if size > old {
			clear(b[old:])
		}
		return b
	}
	nb := a.Allocate(size)
	copy(nb, b)
	return nb
}

func (a *parseArena) Free([]byte) {}

// release returns every buffer of the read to the pools; the arena and
// whatever its buffers held must not be used after.
func (a *parseArena) release() {
	for _, b := range a.used {
		if c := bits.Len(uint(cap(b) - 1)); cap(b) == 1<<c && c >= arenaMinClass && c <= arenaMaxClass {
			b = b[:cap(b)]
			arenaPools[c].Put(&b)
		}
	}
	a.used = nil
}
