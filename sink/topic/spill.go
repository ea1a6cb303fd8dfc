package topic

import (
	"fmt"
	"os"
)

// spillBuffer is the sink of one parquet file being written: it keeps the
// first memLimit bytes in memory and moves everything to a temporary file
// in dir once the file grows past that, so a large file costs disk, not RAM,
// while it is being written. It deliberately has no Close method (pqarrow
// closes sinks that have one).
type spillBuffer struct {
	dir      string
	memLimit int64
	mem      []byte
	f        *os.File
	n        int64
}

func (s *spillBuffer) Write(p []byte) (int, error) {
	if s.f == nil && s.n+int64(len(p)) > s.memLimit {
		if err := s.spill(); err != nil {
			return 0, err
		}
	}
	if s.f == nil {
		s.mem = append(s.mem, p...)
		s.n += int64(len(p))
		return len(p), nil
	}
	n, err := s.f.Write(p)
	s.n += int64(n)
	if err != nil {
		return n, fmt.Errorf("write temp file %s: %w", s.f.Name(), err)
	}
	return n, nil
}

func (s *spillBuffer) spill() error {
	f, err := os.CreateTemp(s.dir, "deltabus-part-*.parquet")
	if err != nil {
		return fmt.Errorf("create temp file for a data file: %w", err)
	}
	if _, err := f.Write(s.mem); err != nil {
		f.Close()
		os.Remove(f.Name())
		return fmt.Errorf("write temp file %s: %w", f.Name(), err)
	}
	s.f, s.mem = f, nil
	return nil
}

// Len is the number of bytes written so far.
func (s *spillBuffer) Len() int64 { return s.n }

// Bytes returns the whole content; a spilled file is read back from disk.
func (s *spillBuffer) Bytes() ([]byte, error) {
	if s.f == nil {
		return s.mem, nil
	}
	data, err := os.ReadFile(s.f.Name())
	if err != nil {
		return nil, fmt.Errorf("read temp file: %w", err)
	}
	return data, nil
}

// Discard frees the memory and removes the temporary file, if any.
func (s *spillBuffer) Discard() {
	s.mem = nil
	if s.f != nil {
		s.f.Close()
		os.Remove(s.f.Name())
		s.f = nil
	}
}
