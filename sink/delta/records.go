package delta

// StatsRecords sums the numRecords statistics of the snapshot's active
// files (files without statistics count as zero; see Inspect for an exact
// count that reads their footers).
func (s *Snapshot) StatsRecords() int64 {
	var n int64
	for _, a := range s.Files {
		if v, ok := StatsNumRecords(s.statsOf(&a)); ok {
			n += v
		}
	}
	return n
}
