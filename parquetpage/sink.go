package parquetpage

import "io"

// flushBytes is the most a sink buffers: pages and their headers reach
// the io.Writer in writes of about this size (a page larger than it, in
// one write of its own), not two writes per page.
const flushBytes = 256 << 10

// sink is a file's io.Writer with the count of bytes written, buffered
// ones included; while a row group is encoded it buffers in a buffer lent
// by the encoder, so a File holds no buffer between row groups.
type sink struct {
	w         io.Writer
	off       int64
	buf       []byte
	buffering bool
}

// lend makes s buffer in buf until reclaim.
func (s *sink) lend(buf []byte) { s.buf, s.buffering = buf[:0], true }

// reclaim writes out what is buffered and returns the buffer.
func (s *sink) reclaim() ([]byte, error) {
	err := s.flush()
	buf := s.buf
	s.buf, s.buffering = nil, false
	return buf, err
}

func (s *sink) Write(p []byte) (int, error) {
	if s.buffering && len(s.buf)+len(p) <= flushBytes {
		s.buf = append(s.buf, p...)
		s.off += int64(len(p))
		return len(p), nil
	}
	if err := s.flush(); err != nil {
		return 0, err
	}
	n, err := s.w.Write(p)
	s.off += int64(n)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	return n, err
}

func (s *sink) write(p []byte) error {
	_, err := s.Write(p)
	return err
}

func (s *sink) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	n, err := s.w.Write(s.buf)
	if err == nil && n < len(s.buf) {
		err = io.ErrShortWrite
	}
	s.buf = s.buf[:0]
	return err
}
