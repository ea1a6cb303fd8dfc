package migrations

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/deltabus/deltabus/usererr"
)

// MinMajor is the oldest PostgreSQL major version DeltaBus supports. The
// relay asks pgoutput for logical messages (its rebuild watermarks are
// messages it emits into its own stream); pgoutput streams them since
// PostgreSQL 14, and a 13 server refuses the option, so a relay could not
// even start its stream there. 13 reached its end of life in November
// 2025.
const MinMajor = 14

// CheckServerVersion refuses a server older than MinMajor with a one-line
// error that says to upgrade it. It reads the version the server announced
// when the connection started (server_version), so it costs no query
// unless a proxy in between withheld it.
func CheckServerVersion(ctx context.Context, conn *pgx.Conn) error {
	version := conn.PgConn().ParameterStatus("server_version")
	if version == "" {
		if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
			return fmt.Errorf("read server version: %w", err)
		}
	}
	major, err := parseMajor(version)
	if err != nil {
		return err
	}
	if major < MinMajor {
		return tooOld(version)
	}
	return nil
}

// Major returns the major version of the server at the other end of conn,
// from the version it announced when the connection started; 0 when it
// announced none (a proxy in between may withhold it).
func Major(conn *pgconn.PgConn) int {
	m, err := parseMajor(conn.ParameterStatus("server_version"))
	if err != nil {
		return 0
	}
	return m
}

// checkServerVersion is CheckServerVersion by query, inside a transaction
// (Apply): it returns server_version_num.
func checkServerVersion(ctx context.Context, q querier) (int, error) {
	v, err := serverVersionNum(ctx, q)
	if err != nil {
		return 0, err
	}
	if v < MinMajor*10000 {
		var version string
		if err := q.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
			return 0, fmt.Errorf("read server version: %w", err)
		}
		return v, tooOld(version)
	}
	return v, nil
}

func serverVersionNum(ctx context.Context, q querier) (int, error) {
	var v int
	if err := q.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&v); err != nil {
		return 0, fmt.Errorf("read server version: %w", err)
	}
	return v, nil
}

func tooOld(version string) error {
	if f := strings.Fields(version); len(f) > 0 {
		version = f[0] // "13.23", not "13.23 (Debian 13.23-1.pgdg120+1)"
	}
	return usererr.New(nil, "PostgreSQL %s is not supported: DeltaBus needs PostgreSQL %d or later, whose pgoutput streams the logical messages the relay relies on; upgrade the database server", version, MinMajor)
}

// parseMajor reads the major version of a server_version: "16.4",
// "16.4 (Debian 16.4-1.pgdg120+1)", "18beta1", "9.6.24" (major 9).
func parseMajor(version string) (int, error) {
	end := strings.IndexFunc(version, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(version)
	}
	m, err := strconv.Atoi(version[:end])
	if err != nil {
		return 0, fmt.Errorf("server_version %q is not a PostgreSQL version", version)
	}
	return m, nil
}
