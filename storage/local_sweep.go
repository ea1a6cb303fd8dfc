package storage

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"
)

// SweepTemp implements Sweeper: it removes the temporary files
// (".<name>.<uuid>.tmp", left by a writer killed before its Commit, Put or
// PutIfAbsent finished) of keys under prefix whose modification time is at
// least olderThan ago. A temporary file belongs to the key of its
// directory and <name> (shortened for names near NAME_MAX). The removals
// are not fsynced: a crash may bring a swept file back, for a later sweep.
func (l *Local) SweepTemp(ctx context.Context, prefix string, olderThan time.Duration) (int, error) {
	if err := checkSweep(ctx, l, prefix, olderThan); err != nil {
		return 0, err
	}
	cutoff := time.Now().Add(-olderThan)
	dir, _ := splitDir(prefix)
	n := 0
	var rmErr error
	keep := func(key string) bool { return strings.HasPrefix(tempTarget(key), prefix) }
	err := l.walk(ctx, dir, true, keep, func(key string, fi fs.FileInfo) {
		if !fi.ModTime().Before(cutoff) || rmErr != nil {
			return
		}
		switch err := os.Remove(l.path(key)); {
		case err == nil:
			n++
		case !isNotFound(err): // gone: its writer finished meanwhile
			rmErr = err
		}
	})
	if err == nil {
		err = rmErr
	}
	if err != nil {
		return n, fmt.Errorf("sweep temporary files under %q in %s: %w", prefix, l, err)
	}
	return n, nil
}

// tempTarget returns the key a temporary file's key was written for:
// "a/.b.<uuid>.tmp" → "a/b".
func tempTarget(key string) string {
	dir, name := splitDir(key)
	name = strings.TrimSuffix(name, tempSuffix)
	return joinKey(dir, name[1:len(name)-37])
}
