// Package usererr marks failures the operator must fix: bad configuration,
// an unreachable database, wrong wal_level, a missing publication, a slot in
// use. Such an error's message is one line that says what is wrong and how
// to fix it; the CLI prints it as is ("relay: <message>") and exits
// non-zero, having written nothing.
package usererr

import (
	"errors"
	"fmt"
	"strings"
)

// Error is a failure the operator must fix.
type Error struct {
	Msg string
	Err error // underlying cause, if any
	// Retryable marks conditions that may clear by themselves (database
	// unreachable, slot busy): fatal at startup, retried once streaming.
	Retryable bool
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// New returns an Error with a formatted one-line message (newlines are
// folded) and its cause.
func New(cause error, format string, args ...any) *Error {
	return &Error{Msg: oneLine(fmt.Sprintf(format, args...)), Err: cause}
}

// Retry returns an Error that a running relay retries.
func Retry(cause error, format string, args ...any) *Error {
	e := New(cause, format, args...)
	e.Retryable = true
	return e
}

// Is reports whether err is (or wraps) an Error.
func Is(err error) bool {
	var ue *Error
	return errors.As(err, &ue)
}

// IsRetryable reports whether err is an Error marked Retryable.
func IsRetryable(err error) bool {
	var ue *Error
	return errors.As(err, &ue) && ue.Retryable
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}
