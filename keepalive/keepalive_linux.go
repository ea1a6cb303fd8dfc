//go:build linux

package keepalive

import (
	"errors"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func setUserTimeout(fd uintptr, d time.Duration) error {
	return unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d/time.Millisecond))
}

// Inspect reads back the liveness settings of a TCP connection's socket,
// for tests that check a connection was dialed with them.
// A wrapping net.Conn is looked through when it has a NetConn method (as
// *tls.Conn has).
func Inspect(c net.Conn) (Options, error) {
	for {
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = w.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return Options{}, errors.New("keepalive: not a socket")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return Options{}, err
	}
	var o Options
	var serr error
	err = raw.Control(func(fd uintptr) {
		get := func(level, opt int) int {
			v, err := unix.GetsockoptInt(int(fd), level, opt)
			serr = errors.Join(serr, err)
			return v
		}
		o.Off = get(unix.SOL_SOCKET, unix.SO_KEEPALIVE) == 0
		o.Idle = time.Duration(get(unix.IPPROTO_TCP, unix.TCP_KEEPIDLE)) * time.Second
		o.Interval = time.Duration(get(unix.IPPROTO_TCP, unix.TCP_KEEPINTVL)) * time.Second
		o.Count = get(unix.IPPROTO_TCP, unix.TCP_KEEPCNT)
		o.UserTimeout = time.Duration(get(unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)) * time.Millisecond
	})
	return o, errors.Join(err, serr)
}
