package storage

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing [off, off+n) of f to
// disk without waiting (sync_file_range SYNC_FILE_RANGE_WRITE), so the
// fsync at commit finds little left to do. Errors are ignored: it is only
// a hint, and the fsync reports any real failure.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
