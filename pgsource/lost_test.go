package pgsource

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestConnectionLost(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{fmt.Errorf("check: %w", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to unexpected postmaster exit"}), true},
		{&pgconn.PgError{Code: "08006"}, true},
		{&pgconn.PgError{Code: "53300", Message: "too many connections"}, true},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{&pgconn.PgError{Code: "42501", Message: "permission denied for table outbox"}, false},
		{&pgconn.PgError{Code: "42P01", Message: "relation does not exist"}, false},
		{errors.New("publication \"deltabus\" does not exist"), false},
	} {
		if got := ConnectionLost(c.err); got != c.want {
			t.Errorf("ConnectionLost(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
