package storage

import "time"

// SetBufferedUploads switches S3 uploads to the old path (one PutObject
// whose body the HTTP layer reads into memory) for the memory benchmark,
// and returns a function that restores the previous setting.
func SetBufferedUploads(on bool) (restore func()) {
	old := bufferedUploads.Swap(on)
	return func() { bufferedUploads.Store(old) }
}

// SetPartSize sets the multipart part size of s (S3 accepts 5 MiB and up),
// so tests reach multipart uploads with small objects.
func SetPartSize(s *S3, n int64) { s.partSize = n }

// SetRetryLogEvery sets how often, at most, s logs a retried request.
func SetRetryLogEvery(s *S3, d time.Duration) {
	s.retryLog.mu.Lock()
	defer s.retryLog.mu.Unlock()
	s.retryLog.every = d
}

// DirSyncs returns how many directory fsyncs local stores made so far.
func DirSyncs() int64 { return dirSyncs.Load() }

// WithoutSpares makes l write named temporary files only, as on a file
// system without O_TMPFILE.
func WithoutSpares(l *Local) { l.spares.close(); l.spares = nil }

// WaitSpares returns once l makes no spare in the background.
func WaitSpares(l *Local) { l.spares.wait() }
