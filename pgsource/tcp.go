package pgsource

import (
	"fmt"
	"strconv"
	"time"

	"github.com/deltabus/deltabus/keepalive"
)

// Liveness returns the TCP liveness settings of a connection: package
// keepalive's defaults (probes after 15 s idle, every 5 s, three times;
// unacknowledged data fails the connection after 30 s), changed by the
// DSN's libpq parameters keepalives (0 turns probes off),
// keepalives_idle, keepalives_interval, keepalives_count (seconds) and
// tcp_user_timeout (milliseconds; 0 = the kernel's default). It removes
// them from params: libpq applies them to its own socket, and pgx would
// otherwise send them to the server as settings (tcp_user_timeout would
// then set the server's side, not the relay's).
func Liveness(params map[string]string) (keepalive.Options, error) {
	o := keepalive.Default
	seconds := func(name string, set func(int)) error {
		v, ok := params[name]
		if !ok {
			return nil
		}
		delete(params, name)
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("%s=%q: want a whole number of seconds (libpq's meaning)", name, v)
		}
		if n > 0 { // 0: the system default in libpq; keep ours
			set(n)
		}
		return nil
	}
	if v, ok := params["keepalives"]; ok {
		delete(params, "keepalives")
		switch v {
		case "0":
			o.Off = true
		case "1":
		default:
			return o, fmt.Errorf("keepalives=%q: want 1 (on, the default) or 0 (off)", v)
		}
	}
	errs := []error{
		seconds("keepalives_idle", func(n int) { o.Idle = time.Duration(n) * time.Second }),
		seconds("keepalives_interval", func(n int) { o.Interval = time.Duration(n) * time.Second }),
		seconds("keepalives_count", func(n int) { o.Count = n }),
	}
	for _, err := range errs {
		if err != nil {
			return o, err
		}
	}
	if v, ok := params["tcp_user_timeout"]; ok {
		delete(params, "tcp_user_timeout")
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return o, fmt.Errorf("tcp_user_timeout=%q: want milliseconds (libpq's meaning), 0 for the kernel's default", v)
		}
		o.UserTimeout = time.Duration(n) * time.Millisecond
	}
	return o, nil
}
