package relay

import (
	"errors"
	"fmt"
)

// UserError is a failure the operator must fix: bad config, unreachable
// database, wrong wal_level, missing publication or slot. Its message is one
// line that says what is wrong and how to fix it; the CLI prints it and exits
// non-zero without writing anything.
type UserError struct {
	Msg string
	Err error // underlying cause, if any
	// Retryable marks conditions that may clear by themselves (database
	// unreachable, slot busy): fatal at startup, retried once streaming.
	Retryable bool
}

func (e *UserError) Error() string { return e.Msg }
func (e *UserError) Unwrap() error { return e.Err }

func userErr(cause error, format string, args ...any) *UserError {
	return &UserError{Msg: fmt.Sprintf(format, args...), Err: cause}
}

// IsUserError reports whether err is (or wraps) a UserError.
func IsUserError(err error) bool {
	var ue *UserError
	return errors.As(err, &ue)
}

// fatalError marks an error that a restart cannot cure (a zombie relay
// already committed our batch, a table we must not write): Run stops.
type fatalError struct{ err error }

func (e fatalError) Error() string { return e.err.Error() }
func (e fatalError) Unwrap() error { return e.err }

func isFatal(err error) bool {
	var fe fatalError
	return errors.As(err, &fe) || IsUserError(err)
}

// retryable reports whether a running relay should start a new session
// after err rather than stop.
func retryable(err error) bool {
	var fe fatalError
	if errors.As(err, &fe) {
		return false
	}
	var ue *UserError
	if errors.As(err, &ue) {
		return ue.Retryable
	}
	return true
}
