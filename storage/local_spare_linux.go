package storage

import (
	"errors"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Spare inodes. On ext4 the dearest step of a small durable write can be
// allocating the new file's inode, not the fsync: on the development VM
// (ext4 without a journal) 0.05 ms in a quiet part of the disk but 1-4 ms
// of kernel CPU for minutes after many files nearby were deleted, against
// 0.2 ms for the fsync. A Delta commit makes two new files one after the
// other (the data file, then the log entry), per topic, so that
// allocation sat twice on every commit's path. A Local therefore keeps,
// per directory it writes often, one spare: an unnamed file opened with
// O_TMPFILE ahead of time by a background goroutine. A put takes the
// spare, writes and fsyncs it, and names it with linkat(2), which fails
// with EEXIST instead of overwriting, as link(2) of a named temporary file
// did. An unnamed file has no name to leave behind: a crash before linkat
// frees it (the kernel's orphan list).
//
// Bounds: one spare (an open descriptor and an empty inode) per directory,
// for at most maxSpareDirs directories per store; a directory gets a spare
// from its second put within spareIdle, so a store that writes each of
// many directories once makes none; a spare unused for spareIdle is closed
// at a later put. Close releases them all. Where O_TMPFILE or /proc/self/fd
// is missing, puts use named temporary files as before.
const (
	maxSpareDirs = 64
	spareIdle    = time.Minute
)

type spareSet struct {
	mu      sync.Mutex
	byDir   map[string]*spare
	filling sync.WaitGroup
	closed  bool
}

type spare struct {
	f       *os.File
	used    time.Time // the directory's last put
	filling bool
}

var unnamedOff = func() bool { _, err := os.Stat("/proc/self/fd"); return err != nil }()

func newSpareSet() *spareSet {
	if unnamedOff {
		return nil
	}
	return &spareSet{byDir: map[string]*spare{}}
}

// openUnnamed opens a new unnamed file in dir (O_TMPFILE): nil, nil when the
// file system cannot, so the caller writes a named temporary file.
func openUnnamed(dir string) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
			return nil, nil
		}
		return nil, &os.PathError{Op: "open O_TMPFILE", Path: dir, Err: err}
	}
	return os.NewFile(uintptr(fd), dir+"/(unnamed)"), nil
}

// take returns an unnamed file in dir, the spare if there is one, and has
// the next spare made in the background (after this put's own file, so a
// put never loses the last free inode to its directory's next spare).
// nil, nil: use a named temporary file.
func (s *spareSet) take(dir string) (*os.File, error) {
	if s == nil {
		return nil, nil
	}
	now := time.Now()
	s.mu.Lock()
	s.evict(now)
	var f *os.File
	sp := s.byDir[dir]
	if sp != nil {
		f, sp.f, sp.used = sp.f, nil, now
	} else if len(s.byDir) < maxSpareDirs && !s.closed {
		s.byDir[dir] = &spare{used: now} // a spare from the next put on
	}
	s.mu.Unlock()
	var err error
	if f == nil {
		f, err = openUnnamed(dir)
	}
	if sp != nil {
		s.refill(dir)
	}
	return f, err
}

// refill starts making dir's next spare unless one is being made.
func (s *spareSet) refill(dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sp := s.byDir[dir]; sp != nil && !sp.filling && sp.f == nil && !s.closed {
		sp.filling = true
		s.filling.Add(1)
		go s.fill(dir)
	}
}

// fill makes dir's next spare, unless the directory was evicted meanwhile.
func (s *spareSet) fill(dir string) {
	defer s.filling.Done()
	f, _ := openUnnamed(dir) // a failure shows at the next put, made inline
	s.mu.Lock()
	defer s.mu.Unlock()
	if sp := s.byDir[dir]; sp != nil && !s.closed {
		sp.filling = false
		if sp.f == nil && f != nil {
			sp.f, f = f, nil
		}
	}
	if f != nil {
		f.Close()
	}
}

// evict closes the spares of directories idle for spareIdle. s.mu is held.
func (s *spareSet) evict(now time.Time) {
	for dir, sp := range s.byDir {
		if now.Sub(sp.used) >= spareIdle && !sp.filling {
			if sp.f != nil {
				sp.f.Close()
			}
			delete(s.byDir, dir)
		}
	}
}

// wait returns once no spare is being made (tests).
func (s *spareSet) wait() {
	if s != nil {
		s.filling.Wait()
	}
}

// close releases every spare, waiting for the ones being made.
func (s *spareSet) close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.filling.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for dir, sp := range s.byDir {
		if sp.f != nil {
			sp.f.Close()
		}
		delete(s.byDir, dir)
	}
}

// linkUnnamed gives the unnamed file f the name path; an error wrapping
// os.ErrExist when path is taken.
func linkUnnamed(f *os.File, path string) error {
	err := unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(f.Fd())), unix.AT_FDCWD, path, unix.AT_SYMLINK_FOLLOW)
	if err != nil {
		return &os.LinkError{Op: "linkat", Old: f.Name(), New: path, Err: err}
	}
	return nil
}
