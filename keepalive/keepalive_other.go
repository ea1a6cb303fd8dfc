//go:build !linux

package keepalive

import (
	"errors"
	"net"
	"time"
)

// setUserTimeout: TCP_USER_TIMEOUT is Linux's; elsewhere keepalives only.
func setUserTimeout(uintptr, time.Duration) error { return nil }

// Inspect is implemented on Linux only.
func Inspect(net.Conn) (Options, error) {
	return Options{}, errors.New("keepalive: Inspect is implemented on Linux only")
}
