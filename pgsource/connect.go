package pgsource

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/deltabus/deltabus/usererr"
)

// DefaultConnectTimeout applies when the DSN sets none.
const DefaultConnectTimeout = 10 * time.Second

// ApplicationName is what the relay's connections show in
// pg_stat_activity, unless the DSN sets application_name.
func ApplicationName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("deltabus %s pid %d", host, os.Getpid())
}

// ParseConfig parses a DSN for a normal SQL connection. The error is a
// usererr with the password redacted.
func ParseConfig(dsn string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, usererr.New(err, "source DSN is invalid: %s; expected postgres://user@host:5432/db", Redact(err.Error()))
	}
	if err := Configure(&cfg.Config); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Configure gives a parsed connection configuration the settings every
// connection of DeltaBus has: a connect timeout, an application_name, and
// TCP keepalives and TCP_USER_TIMEOUT on its socket (see Liveness), so a
// host that vanished fails the connection within about 30 s instead of
// after the kernel's fifteen minutes. For connections parsed elsewhere
// (pgxpool.ParseConfig: &cfg.ConnConfig.Config).
func Configure(cfg *pgconn.Config) error {
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = ApplicationName()
	}
	live, err := Liveness(cfg.RuntimeParams)
	if err != nil {
		return usererr.New(err, "source DSN is invalid: %s", err)
	}
	// ConnectTimeout bounds the whole connection attempt (pgconn applies
	// it to the context), so the dialer needs no timeout of its own.
	cfg.DialFunc = live.Dialer(0).DialContext
	return nil
}

// Connect opens a normal SQL connection. A failure is a retryable usererr
// of one line: where it tried to connect and the root cause.
func Connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	return connect(ctx, dsn, 0)
}

// QueryTimeout is how long the relay's own short queries (its checks at
// each session start, slot reads, the heartbeat, `relay status`) wait for
// an answer from the server before the connection is declared dead. A
// catalog query takes milliseconds; thirty seconds is a server that is
// frozen or a connection that is gone.
const QueryTimeout = 30 * time.Second

// ConnectBounded is Connect for a connection that runs short queries
// only: every read that waits longer than answer for the server fails the
// connection with an *AnswerTimeoutError, whatever the caller's context
// allows. It is the deadline of the daemon's background queries: a server
// whose kernel still acknowledges (a frozen backend, a stuck middlebox)
// defeats TCP keepalives, never this.
func ConnectBounded(ctx context.Context, dsn string, answer time.Duration) (*pgx.Conn, error) {
	return connect(ctx, dsn, answer)
}

func connect(ctx context.Context, dsn string, answer time.Duration) (*pgx.Conn, error) {
	cfg, err := ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	if answer > 0 {
		cfg.DialFunc = dialAnswering(cfg.DialFunc, answer)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, ConnectError(&cfg.Config, err)
	}
	return conn, nil
}

// ConnectReplication opens a replication=database connection with the
// session settings the relay's decoder relies on (ISO dates, UTC). Its
// reads gather the walsender's messages in batches (gatherConn) into a
// 64 KiB buffer: up to a millisecond more latency, far fewer wake-ups and
// reads.
func ConnectReplication(ctx context.Context, dsn string) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, usererr.New(err, "source DSN is invalid: %s; expected postgres://user@host:5432/db", Redact(err.Error()))
	}
	if err := Configure(cfg); err != nil {
		return nil, err
	}
	cfg.RuntimeParams["replication"] = "database"
	cfg.RuntimeParams["datestyle"] = "ISO, MDY"
	cfg.RuntimeParams["timezone"] = "UTC"
	cfg.DialFunc = dialGathering(cfg.DialFunc, streamGather)
	cfg.BuildFrontend = gatheringFrontend(streamGather)
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, ConnectError(cfg, err)
	}
	return conn, nil
}

// ConnectError turns a failed connection attempt into one line: the server
// addresses tried and the root cause, never the DSN. It is retryable: a
// server that is restarting comes back, and with several hosts and
// target_session_attrs (an HA set-up) one of them becomes the primary.
func ConnectError(cfg *pgconn.Config, err error) *usererr.Error {
	where := hosts(cfg)
	if errors.Is(err, context.Canceled) {
		return usererr.Retry(err, "connect to PostgreSQL at %s: canceled", where)
	}
	return usererr.Retry(err, "cannot connect to PostgreSQL at %s: %s; check the source DSN and that the server is running",
		where, RootCause(err))
}

// hosts names the addresses a configuration tries, in order, with the
// session attributes it requires of them.
func hosts(cfg *pgconn.Config) string {
	out := strings.Join(addresses(cfg), ", ")
	if cfg.ValidateConnect != nil { // target_session_attrs other than any
		out += " (for the DSN's target_session_attrs)"
	}
	return out
}

// RootCause reduces an error to the part an operator acts on: a server
// error's message, a network error's innermost cause, else the innermost
// wrapped error. Passwords are redacted.
func RootCause(err error) string {
	var answer *AnswerTimeoutError
	if errors.As(err, &answer) {
		return answer.Error()
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return Redact(pgErr.Message)
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return Redact(dnsErr.Error())
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Err != nil {
		err = opErr.Err
	}
	if pgconn.Timeout(err) {
		return "timed out"
	}
	for {
		u := errors.Unwrap(err)
		if u == nil {
			break
		}
		err = u
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 && strings.Contains(msg, "failed to connect") {
		msg = msg[i+2:]
	}
	return Redact(msg)
}

var (
	passwordInURL = regexp.MustCompile(`(://[^:/@\s]*:)[^@\s]*@`)
	passwordKV    = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)
)

// Redact removes passwords from every DSN inside s (URL and key=value
// forms).
func Redact(s string) string {
	s = passwordInURL.ReplaceAllString(s, "${1}xxxxx@")
	return passwordKV.ReplaceAllString(s, "${1}xxxxx")
}

// addresses lists the host:port a configuration tries, in order (pgconn
// makes a fallback per host, and another per sslmode it may try).
func addresses(cfg *pgconn.Config) []string {
	addrs := []string{net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))}
	for _, f := range cfg.Fallbacks {
		if a := net.JoinHostPort(f.Host, fmt.Sprint(f.Port)); !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// Describe renders a DSN for messages: user@host:port/database (every host
// of a multi-host DSN), never the password or other parameters. An
// unparsable DSN is described as such.
func Describe(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "(invalid DSN)"
	}
	return fmt.Sprintf("%s@%s/%s", cfg.User, strings.Join(addresses(cfg), ","), cfg.Database)
}

// NewPool opens a pgxpool whose connections are configured as Connect's
// (Configure): for the consumers' checkpoint database. It connects
// lazily, as pgxpool.New does.
func NewPool(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, usererr.New(err, "DSN is invalid: %s; expected postgres://user@host:5432/db", Redact(err.Error()))
	}
	if err := Configure(&cfg.ConnConfig.Config); err != nil {
		return nil, err
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}
