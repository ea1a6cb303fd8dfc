//go:build !linux

package bench

import (
	"errors"
	"time"
)

// visibility needs inotify: elsewhere the latency runs time a commit by
// its file's mtime.
type visibility struct{}

func watchVisibility(string) (*visibility, error) { return nil, nil }

func (*visibility) end() error { return nil }

func (*visibility) at(string, string) (time.Time, bool, error) {
	return time.Time{}, false, errors.New("visibility: inotify is Linux's")
}
