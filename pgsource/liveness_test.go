package pgsource

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/keepalive"
	"github.com/deltabus/deltabus/tests/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func dsnWith(t *testing.T, params string) string {
	t.Helper()
	dsn := pgtest.SharedDSN(t)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + params
}

func inspect(t *testing.T, what string, c net.Conn) keepalive.Options {
	t.Helper()
	o, err := keepalive.Inspect(c)
	if err != nil {
		t.Fatalf("%s connection: %v", what, err)
	}
	return o
}

// TestEveryConnectionHasKeepalives: the SQL, bounded, replication and bulk
// (bootstrap COPY) connections all dial with keepalives and
// TCP_USER_TIMEOUT.
func TestEveryConnectionHasKeepalives(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := pgtest.SharedDSN(t)
	sql, err := Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer sql.Close(ctx)
	bounded, err := ConnectBounded(ctx, dsn, QueryTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer bounded.Close(ctx)
	repl, err := ConnectReplication(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer repl.Close(ctx)
	cfg, err := ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	GatherBulk(&cfg.Config)
	bulk, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer bulk.Close(ctx)
	for what, c := range map[string]net.Conn{"SQL": sql.PgConn().Conn(), "bounded": bounded.PgConn().Conn(),
		"replication": repl.Conn(), "bulk": bulk.PgConn().Conn()} {
		if got := inspect(t, what, c); got != keepalive.Default {
			t.Errorf("%s connection: socket has %+v, want %+v", what, got, keepalive.Default)
		}
	}
}

// TestLibpqKeepaliveParameters: libpq's keepalives_* and tcp_user_timeout
// in a DSN set the relay's socket, and are not sent to the server (which
// would refuse keepalives_idle as an unknown setting).
func TestLibpqKeepaliveParameters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := Connect(ctx, dsnWith(t, "keepalives_idle=7&keepalives_interval=2&keepalives_count=4&tcp_user_timeout=9000"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	want := keepalive.Options{Idle: 7 * time.Second, Interval: 2 * time.Second, Count: 4, UserTimeout: 9 * time.Second}
	if got := inspect(t, "SQL", conn.PgConn().Conn()); got != want {
		t.Fatalf("socket has %+v, want %+v", got, want)
	}
	var server string
	if err := conn.QueryRow(ctx, "SHOW tcp_user_timeout").Scan(&server); err != nil {
		t.Fatal(err)
	}
	if server != "0" {
		t.Fatalf("the server's tcp_user_timeout is %s: the DSN's was sent to the server", server)
	}
	off, err := Connect(ctx, dsnWith(t, "keepalives=0"))
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close(ctx)
	if got := inspect(t, "SQL", off.PgConn().Conn()); !got.Off || got.UserTimeout != keepalive.Default.UserTimeout {
		t.Fatalf("keepalives=0: socket has %+v", got)
	}
}

func TestLivenessRejectsBadValues(t *testing.T) {
	for _, p := range []map[string]string{{"keepalives": "yes"}, {"keepalives_idle": "1m"}, {"keepalives_count": "-1"}, {"tcp_user_timeout": "30s"}} {
		if _, err := Liveness(p); err == nil {
			t.Errorf("Liveness(%v) accepted", p)
		}
	}
	if _, err := ParseConfig("postgres://u@h/db?keepalives_idle=soon"); err == nil || !strings.Contains(err.Error(), "keepalives_idle") {
		t.Errorf("ParseConfig with a bad keepalives_idle: %v", err)
	}
}

// TestBoundedConnectionFailsASilentQuery: a query the server does not
// answer within the bound fails with one line; quicker queries and idle
// time between queries do not count.
func TestBoundedConnectionFailsASilentQuery(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := ConnectBounded(ctx, pgtest.SharedDSN(t), 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_sleep(0.2)"); err != nil {
		t.Fatalf("a query answered within the bound: %v", err)
	}
	time.Sleep(time.Second) // idle: no read waits
	began := time.Now()
	_, err = conn.Exec(ctx, "SELECT pg_sleep(5)")
	took := time.Since(began)
	var answer *AnswerTimeoutError
	if !errors.As(err, &answer) || took > 3*time.Second {
		t.Fatalf("a query the server sat on for 5s: %v after %s, want an AnswerTimeoutError after 0.5s", err, took)
	}
	if !ConnectionLost(err) {
		t.Errorf("ConnectionLost(%v) = false: a caller would not retry", err)
	}
	if rc := RootCause(err); !strings.Contains(rc, "did not answer within 500ms") {
		t.Errorf("RootCause = %q", rc)
	}
	// A context's cancellation still interrupts a read at once.
	conn2, err := ConnectBounded(ctx, pgtest.SharedDSN(t), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close(ctx)
	qctx, qcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer qcancel()
	began = time.Now()
	if _, err := conn2.Exec(qctx, "SELECT pg_sleep(5)"); err == nil || time.Since(began) > 3*time.Second {
		t.Fatalf("a cancelled query: %v after %s", err, time.Since(began))
	}
}

func TestWalSenderTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		params string
		want   time.Duration
	}{{"", time.Minute}, {"options=-c%20wal_sender_timeout%3D5s", 5 * time.Second}, {"options=-c%20wal_sender_timeout%3D0", 0},
		{"options=-c%20wal_sender_timeout%3D1500", 1500 * time.Millisecond}, {"options=-c%20wal_sender_timeout%3D2min", 2 * time.Minute},
		{"options=-c%20wal_sender_timeout%3D1h", time.Hour}, {"options=-c%20wal_sender_timeout%3D2147483647", 2147483647 * time.Millisecond}} {
		dsn := pgtest.SharedDSN(t)
		if tc.params != "" {
			dsn = dsnWith(t, tc.params)
		}
		conn, err := Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		got, err := WalSenderTimeout(ctx, conn)
		conn.Close(ctx)
		if err != nil || got != tc.want {
			t.Errorf("%q: wal_sender_timeout %v (%v), want %v", tc.params, got, err, tc.want)
		}
	}
}
