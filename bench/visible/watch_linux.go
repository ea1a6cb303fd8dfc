//go:build linux

package visible

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/deltabus/deltabus/sink/delta"
)

// Watcher records when each commit file of a local store's tables got its
// name. Watch starts one.
type Watcher struct {
	root  string
	fd    int
	stop  [2]int // pipe: a write ends the watch
	done  chan struct{}
	once  sync.Once
	ended error

	parent int32 // watch descriptor of root's parent

	mu       sync.Mutex
	dirs     map[int32]string     // watch descriptor → folder, relative to root ("" is root)
	seen     map[string]time.Time // table/_delta_log/NAME.json → when it got its name
	overflow bool                 // the kernel's queue overflowed: some times are missing
	err      error                // the first error of the watch
}

// Watch starts watching the folder root of a store's tables: a local
// store, or the folder where an S3 server keeps a store's objects as
// files. Made later, root is watched from then. End it with End.
func Watch(root string) (*Watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	v := &Watcher{root: root, fd: fd, done: make(chan struct{}),
		dirs: map[int32]string{}, seen: map[string]time.Time{}}
	if err := unix.Pipe2(v.stop[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("pipe: %w", err)
	}
	// The root's parent too, for the root's name only: an S3 server that
	// keeps objects as files may remove a folder once it is empty
	// (versitygw does, when the relay's start deletes its probe) and make
	// it again with the next object.
	wd, err := unix.InotifyAddWatch(fd, filepath.Dir(root), watchMask)
	if err != nil {
		v.close()
		return nil, fmt.Errorf("watch %s: %w", filepath.Dir(root), err)
	}
	v.parent = int32(wd)
	if err := v.add(""); err != nil {
		v.close()
		return nil, err
	}
	go v.run()
	return v, nil
}

// watchMask: names made in a folder, and whether the watch itself ended.
const watchMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_ONLYDIR

// add watches the folder rel (relative to root), then looks at what it
// already holds: folders made before the watch are watched too.
func (v *Watcher) add(rel string) error {
	wd, err := unix.InotifyAddWatch(v.fd, filepath.Join(v.root, rel), watchMask)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // removed meanwhile
		}
		return fmt.Errorf("watch %s: %w", filepath.Join(v.root, rel), err)
	}
	v.mu.Lock()
	v.dirs[int32(wd)] = rel
	v.mu.Unlock()
	entries, err := os.ReadDir(filepath.Join(v.root, rel))
	if err != nil {
		return nil // removed meanwhile
	}
	for _, e := range entries {
		if e.IsDir() && wanted(rel, e.Name()) {
			if err := v.add(filepath.Join(rel, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// wanted reports whether the folder name inside rel is one to watch: any
// folder of root (a table's; the catalog's costs one idle watch), the
// _delta_log of a table.
func wanted(rel, name string) bool {
	switch {
	case rel == "":
		return !strings.HasPrefix(name, ".")
	case !strings.Contains(rel, "/"):
		return name+"/" == delta.LogDir
	}
	return false
}

// run reads the events until stop is written, on a thread of its own.
func (v *Watcher) run() {
	defer close(v.done)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	buf := make([]byte, 64<<10)
	fds := []unix.PollFd{{Fd: int32(v.fd), Events: unix.POLLIN}, {Fd: int32(v.stop[0]), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		if err != nil && !errors.Is(err, unix.EINTR) {
			v.fail(fmt.Errorf("poll: %w", err))
			return
		}
		if fds[1].Revents != 0 {
			v.drain(buf) // what came before the stop
			return
		}
		if fds[0].Revents != 0 && !v.drain(buf) {
			return
		}
	}
}

// drain reads every queued event; false after an error. The events of a
// read are stamped with the time it returned: each was queued before it.
func (v *Watcher) drain(buf []byte) bool {
	for {
		n, err := unix.Read(v.fd, buf)
		at := time.Now()
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			return true
		}
		if err != nil {
			v.fail(fmt.Errorf("read inotify: %w", err))
			return false
		}
		if err := v.events(buf[:n], at); err != nil {
			v.fail(err)
			return false
		}
	}
}

// events handles one read's events.
func (v *Watcher) events(b []byte, at time.Time) error {
	for len(b) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		size := unix.SizeofInotifyEvent + int(ev.Len)
		if size > len(b) {
			return fmt.Errorf("inotify: a truncated event")
		}
		name := strings.TrimRight(string(b[unix.SizeofInotifyEvent:size]), "\x00")
		b = b[size:]
		if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
			v.mu.Lock()
			v.overflow = true
			v.mu.Unlock()
			continue
		}
		v.mu.Lock()
		rel, ok := v.dirs[ev.Wd]
		v.mu.Unlock()
		switch {
		case ev.Wd == v.parent:
			if ev.Mask&unix.IN_ISDIR != 0 && name == filepath.Base(v.root) {
				if err := v.add(""); err != nil { // the root, made again
					return err
				}
			}
		case ev.Mask&unix.IN_IGNORED != 0: // a folder removed
			v.mu.Lock()
			delete(v.dirs, ev.Wd)
			v.mu.Unlock()
		case !ok:
		case ev.Mask&unix.IN_ISDIR != 0:
			if wanted(rel, name) {
				if err := v.add(filepath.Join(rel, name)); err != nil {
					return err
				}
			}
		case strings.HasSuffix(rel, "/"+strings.TrimSuffix(delta.LogDir, "/")) && strings.HasSuffix(name, ".json") && !strings.HasPrefix(name, "."):
			key := rel + "/" + name
			v.mu.Lock()
			if _, dup := v.seen[key]; !dup {
				v.seen[key] = at
			}
			v.mu.Unlock()
		}
	}
	return nil
}

func (v *Watcher) fail(err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err == nil {
		v.err = err
	}
}

// End stops the watch and reports its first error, or that the kernel's
// queue overflowed. Later calls return the same.
func (v *Watcher) End() error {
	v.once.Do(func() {
		_, _ = unix.Write(v.stop[1], []byte{0})
		<-v.done
		v.close()
		v.mu.Lock()
		defer v.mu.Unlock()
		v.ended = v.err
		if v.ended == nil && v.overflow {
			v.ended = errors.New("inotify: the kernel's event queue overflowed (fs.inotify.max_queued_events)")
		}
	})
	return v.ended
}

func (v *Watcher) close() {
	unix.Close(v.fd)
	unix.Close(v.stop[0])
	unix.Close(v.stop[1])
}

// At returns when the commit file key (delta.CommitKey) of table got its
// name, and whether the watch saw it; else the file's ctime (see the
// package doc). Call it after End.
func (v *Watcher) At(table, key string) (time.Time, bool, error) {
	v.mu.Lock()
	t, ok := v.seen[table+"/"+key]
	v.mu.Unlock()
	if ok {
		return t, true, nil
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(v.root, table, key), &st); err != nil {
		return time.Time{}, false, fmt.Errorf("stat %s: %w", key, err)
	}
	return time.Unix(st.Ctim.Unix()), false, nil
}
