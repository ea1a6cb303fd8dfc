package subscribe

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// pagePool is the memory.Allocator of one decode worker's parquet readers:
// the page buffers a column chunk reader frees when it is closed are reused
// by the next one, instead of a fresh (zeroed) buffer per column of every
// file for the garbage collector to reclaim. Buffers come in power-of-two
// sizes; each size keeps at most poolPerClass free ones, and all of them
// at most poolBytes. Reused memory is cleared, as a new allocation would
// be, unless the pool is raw (setRaw): while only page readers allocate
// (colPages reads the values), every buffer is filled before it is read
// (page bytes read or decompressed into it), and clearing it first is
// wasted work. arrow-go's column readers may rely on zeroed memory: the
// decoder turns raw off before it hands a column over to them.
type pagePool struct {
	mu    sync.Mutex
	free  [maxPoolClass + 1][][]byte
	bytes int // held in free
	raw   atomic.Bool
}

// setRaw turns clearing of reused buffers off (raw) or on. A nil pool
// allocates afresh anyway.
func (p *pagePool) setRaw(raw bool) {
	if p != nil {
		p.raw.Store(raw)
	}
}

const (
	minPoolClass = 12 // 4 KiB
	maxPoolClass = 26 // 64 MiB: larger buffers are not kept
	poolPerClass = 16 // three buffers per column of a file of 12 columns
	poolBytes    = 32 << 20
)

var _ memory.Allocator = (*pagePool)(nil)

func newPagePool() *pagePool { return &pagePool{} }

func poolClass(size int) int {
	return max(bits.Len(uint(size-1)), minPoolClass)
}

// Allocate implements memory.Allocator.
func (p *pagePool) Allocate(size int) []byte {
	if size <= 0 {
		return []byte{}
	}
	c := poolClass(size)
	if c <= maxPoolClass {
		p.mu.Lock()
		if n := len(p.free[c]); n > 0 {
			b := p.free[c][n-1]
			p.free[c] = p.free[c][:n-1]
			p.bytes -= cap(b)
			p.mu.Unlock()
			if !p.raw.Load() {
				clear(b[:size])
			}
			return b[:size]
		}
		p.mu.Unlock()
	}
	return make([]byte, size, 1<<c)
}

// Reallocate implements memory.Allocator.
func (p *pagePool) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		if size > len(b) && !p.raw.Load() {
			clear(b[len(b):size])
		}
		return b[:size]
	}
	nb := p.Allocate(size)
	copy(nb, b)
	p.Free(b)
	return nb
}

// Free implements memory.Allocator: a buffer of a pooled size is kept for
// reuse.
func (p *pagePool) Free(b []byte) {
	c := bits.Len(uint(cap(b))) - 1
	if cap(b) == 0 || cap(b) != 1<<c || c < minPoolClass || c > maxPoolClass {
		return
	}
	p.mu.Lock()
	if len(p.free[c]) < poolPerClass && p.bytes+cap(b) <= poolBytes {
		p.free[c] = append(p.free[c], b[:cap(b)])
		p.bytes += cap(b)
	}
	p.mu.Unlock()
}
