package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// opError wraps an error of op on key in l. A full disk or exhausted quota
// reads "op "key": store file:///root: no space left on device (write
// /root/...)", so the operator sees at once what is wrong and where;
// errors.Is(err, syscall.ENOSPC) (or EDQUOT) still holds.
func (l *Local) opError(op, key string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%s %q: %w", op, key, &noSpaceError{store: l.String(), err: err})
	}
	return fmt.Errorf("%s %q in %s: %w", op, key, l, err)
}

// noSpaceError is a write refused for lack of space (or quota) on a local
// store.
type noSpaceError struct {
	store string
	err   error // wraps syscall.ENOSPC or EDQUOT
}

func (e *noSpaceError) Error() string {
	var errno syscall.Errno
	errors.As(e.err, &errno)
	msg := fmt.Sprintf("store %s: %v", e.store, errno)
	if d := failedCall(e.err); d != "" {
		msg += " (" + d + ")"
	}
	return msg
}

func (e *noSpaceError) Unwrap() error { return e.err }

// failedCall names the system call and path behind err: "write /a/b".
func failedCall(err error) string {
	var pe *fs.PathError
	var le *os.LinkError
	var se *os.SyscallError
	switch {
	case errors.As(err, &pe):
		return pe.Op + " " + pe.Path
	case errors.As(err, &le):
		return le.Op + " " + le.Old + " " + le.New
	case errors.As(err, &se):
		return se.Syscall
	}
	return ""
}
