//go:build !linux

package visible

import (
	"errors"
	"time"
)

// Watcher needs inotify: elsewhere Watch returns nil.
type Watcher struct{}

// Watch returns nil: there is no inotify here.
func Watch(string) (*Watcher, error) { return nil, nil }

// End does nothing.
func (*Watcher) End() error { return nil }

// At fails: nothing was watched.
func (*Watcher) At(string, string) (time.Time, bool, error) {
	return time.Time{}, false, errors.New("visible: inotify is Linux's")
}
