package relay

import (
	"context"
	"time"

	"github.com/deltabus/deltabus/pgsource"
)

// HeartbeatPrefix is the prefix of the relay's heartbeat messages.
const HeartbeatPrefix = "deltabus.heartbeat"

// heartbeat writes a non-transactional logical message into the source
// database every Config.Heartbeat until ctx ends. On a database that writes
// nothing while others in its cluster do, the walsender then has a change
// of ours to send, the session acknowledges past it (it is idle), and the
// slot's position moves on instead of pinning the cluster's WAL. Failures
// are logged at debug level: the replication session reports a database
// that is really gone.
func (r *Relay) heartbeat(ctx context.Context) {
	if r.cfg.Heartbeat < 0 {
		return
	}
	t := time.NewTicker(r.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := r.beat(ctx); err != nil && ctx.Err() == nil {
			r.log.Debug("heartbeat", "err", err)
		}
	}
}

func (r *Relay) beat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgsource.Connect(ctx, r.cfg.Source)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, "SELECT pg_logical_emit_message(false, $1, '')", HeartbeatPrefix)
	return err
}
