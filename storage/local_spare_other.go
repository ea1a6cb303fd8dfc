//go:build !linux

package storage

import (
	"errors"
	"os"
)

// Without O_TMPFILE every put writes a named temporary file.
type spareSet struct{}

func newSpareSet() *spareSet                    { return nil }
func (*spareSet) take(string) (*os.File, error) { return nil, nil }
func (*spareSet) close()                        {}
func linkUnnamed(*os.File, string) error        { return errors.New("unnamed files are Linux only") }

func (*spareSet) wait() {}
