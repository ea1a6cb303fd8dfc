// Package keepalive dials TCP connections that notice a dead peer within a
// bound: TCP keepalive probes on an idle connection, and TCP_USER_TIMEOUT
// on one with unacknowledged data. Without them a connection to a host
// that vanished (a partition, a lost NAT or load-balancer entry, a crashed
// VM) waits on the kernel's defaults: two hours of idleness before the
// first keepalive probe, and about fifteen minutes of retransmissions
// before a write fails.
//
// Guarantees, for every TCP connection a Dialer of Options o opens (Linux;
// elsewhere keepalives only):
//   - an idle connection probes its peer after o.Idle and every o.Interval;
//     it fails after o.Count unanswered probes, or o.UserTimeout after the
//     last acknowledgement, whichever comes first;
//   - data written and not acknowledged for o.UserTimeout fails the
//     connection (ETIMEDOUT), instead of after the kernel's fifteen minutes.
//
// With the defaults (Default) a dead peer fails an idle connection within
// about 35 s and one with a write in flight within 30 s. Keepalives do not
// detect a peer whose kernel still answers while its process is frozen
// (SIGSTOP, a hung server): that needs an answer deadline above the
// socket, as the relay's replication stream and its queries have. Unix
// sockets are left alone.
package keepalive

import (
	"net"
	"strings"
	"syscall"
	"time"
)

// Options are a connection's TCP liveness settings.
type Options struct {
	// Off disables keepalive probes (libpq's keepalives=0); UserTimeout
	// still applies.
	Off bool
	// Idle is how long a connection may be idle before the first probe.
	Idle time.Duration
	// Interval is the time between probes.
	Interval time.Duration
	// Count is how many unanswered probes fail the connection.
	Count int
	// UserTimeout bounds how long written data may stay unacknowledged
	// (TCP_USER_TIMEOUT); 0 keeps the kernel's default.
	UserTimeout time.Duration
}

// Default: an idle peer is probed after 15 s, every 5 s, three times; data
// unacknowledged for 30 s fails the connection. Thirty seconds is longer
// than a routine network blip or a cloud load balancer's failover (a
// broken connection costs a reconnect, nothing else) and far shorter than
// what operators fear: a relay stuck for fifteen minutes.
var Default = Options{Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3, UserTimeout: 30 * time.Second}

// Dialer returns a dialer that applies o to every TCP connection, with
// timeout bounding the dial (0: none beyond the context's).
func (o Options) Dialer(timeout time.Duration) *net.Dialer {
	d := &net.Dialer{Timeout: timeout, Control: o.control}
	if o.Off {
		d.KeepAlive = -1
	} else {
		d.KeepAliveConfig = net.KeepAliveConfig{Enable: true, Idle: o.Idle, Interval: o.Interval, Count: o.Count}
	}
	return d
}

// control sets what net.Dialer cannot: TCP_USER_TIMEOUT, before connect,
// so that it bounds the handshake's retransmissions too.
func (o Options) control(network, _ string, c syscall.RawConn) error {
	if !strings.HasPrefix(network, "tcp") || o.UserTimeout <= 0 {
		return nil
	}
	var serr error
	if err := c.Control(func(fd uintptr) { serr = setUserTimeout(fd, o.UserTimeout) }); err != nil {
		return err
	}
	return serr
}
