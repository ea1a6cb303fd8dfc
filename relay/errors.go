package relay

import (
	"errors"

	"github.com/deltabus/deltabus/usererr"
)

// fatalError marks an error that a restart cannot cure (a zombie relay
// already committed our batch, a table we must not write): Run stops.
type fatalError struct{ err error }

func (e fatalError) Error() string { return e.err.Error() }
func (e fatalError) Unwrap() error { return e.err }

// retryable reports whether a running relay should start a new session
// after err rather than stop.
func retryable(err error) bool {
	var fe fatalError
	if errors.As(err, &fe) {
		return false
	}
	if usererr.Is(err) {
		return usererr.IsRetryable(err)
	}
	return true
}
