package pgsource

import (
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// ConnectionLost reports whether err means the connection to PostgreSQL
// failed, not the request: a network error, a timeout, a connection the
// server closed, or a server error of class 08 (connection exception), 57
// (operator intervention: shutdown, crash, admin termination) or 53
// (insufficient resources). Such an error says nothing about the
// configuration, so a caller retries it rather than exiting.
func ConnectionLost(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		c := pgErr.Code
		return strings.HasPrefix(c, "08") || strings.HasPrefix(c, "57") || strings.HasPrefix(c, "53")
	}
	var netErr net.Error
	return errors.As(err, &netErr) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		strings.Contains(err.Error(), "conn closed")
}
