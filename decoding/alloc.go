package decoding

// Rows and datums are carved out of slabs, so decoding a row costs a few
// hundredths of an allocation instead of two. Handed-out pieces are never
// reused: a retained Row stays intact (its datums' Data still alias the
// input, see Datum), and it keeps at most one slab of each kind alive;
// unless the Decoder reuses rows (ReuseRows): then one Row and one slab
// serve every row.
const (
	rowSlab   = 64
	datumSlab = 512
)

type rowAlloc struct {
	rows   []Row
	datumz []Datum
	// reuse: every row is carved anew from the same Row and slab
	// (Decoder.ReuseRows).
	reuse bool
	row0  Row
	slab  []Datum
}

func (a *rowAlloc) row() *Row {
	if a.reuse {
		a.datumz = a.slab // the last row's datums are free again
		return &a.row0
	}
	if len(a.rows) == 0 {
		a.rows = make([]Row, rowSlab)
	}
	r := &a.rows[0]
	a.rows = a.rows[1:]
	return r
}

// datums returns a zeroed slice of n datums whose capacity is n, so an
// append by the caller cannot reach a neighbour.
func (a *rowAlloc) datums(n int) []Datum {
	if n > datumSlab/4 {
		return make([]Datum, n)
	}
	if len(a.datumz) < n {
		a.datumz = make([]Datum, datumSlab)
		a.slab = a.datumz
	}
	s := a.datumz[:n:n]
	clear(s)
	a.datumz = a.datumz[n:]
	return s
}
