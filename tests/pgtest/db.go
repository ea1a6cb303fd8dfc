package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/pgcluster"
)

var (
	sharedMu  sync.Mutex
	shared    = map[int]*Server{} // by major: started by this process, stopped by Run
	sharedDSN string              // admin DSN of the default shared server
	dbCounter atomic.Int64
)

// Runner is what TestMain has: *testing.M, or a wrapper that composes
// several harnesses.
type Runner interface{ Run() int }

// Run runs the tests of a package and stops the shared server if this
// process started one. Use it from TestMain: os.Exit(pgtest.Run(m)).
func Run(m Runner) int {
	code := m.Run()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	for major, s := range shared {
		s.Stop()
		delete(shared, major)
	}
	return code
}

// SharedDSN returns the admin DSN of the shared server, starting a throwaway
// cluster on first use unless DELTABUS_TEST_PG names one.
func SharedDSN(t testing.TB) string {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedDSN != "" {
		return sharedDSN
	}
	if dsn := os.Getenv("DELTABUS_TEST_PG"); dsn != "" {
		sharedDSN = dsn
		return dsn
	}
	major, err := pgcluster.DefaultMajor()
	if err != nil {
		t.Fatalf("start PostgreSQL: %v", err)
	}
	sharedDSN = sharedOf(t, major).DSN("postgres")
	return sharedDSN
}

// sharedOf returns this process's shared server of a major version,
// starting it on first use. The caller holds sharedMu.
func sharedOf(t testing.TB, major int) *Server {
	t.Helper()
	if s := shared[major]; s != nil {
		return s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := pgcluster.StartVersion(ctx, major)
	if err != nil {
		t.Fatalf("start PostgreSQL %d: %v", major, err)
	}
	t.Logf("pgtest: shared PostgreSQL %d on port %d", s.Major, s.Port)
	shared[major] = s
	return s
}

// DB is a fresh database on the shared server, owned by one test.
type DB struct {
	Name     string
	DSN      string // normal connection to Name
	ReplDSN  string // same, with replication=database
	adminDSN string
}

// NewDB creates a database for the test; at cleanup it drops the database's
// replication slots (terminating their consumers) and the database.
func NewDB(t testing.TB) *DB {
	t.Helper()
	return newDB(t, SharedDSN(t))
}

// NewDBVersion is NewDB on this process's shared server of a major
// version (started on first use, stopped by Run), whatever DELTABUS_TEST_PG
// and DELTABUS_PG_MAJOR say. A major that is not installed fails the test.
func NewDBVersion(t testing.TB, major int) *DB {
	t.Helper()
	return newDB(t, sharedDSNOf(t, major))
}

func sharedDSNOf(t testing.TB, major int) string {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock() // t.Fatalf in sharedOf must not leave it held
	return sharedOf(t, major).DSN("postgres")
}

func newDB(t testing.TB, admin string) *DB {
	t.Helper()
	name := fmt.Sprintf("t_%d_%d_%s", os.Getpid(), dbCounter.Add(1), sanitize(t.Name()))
	if len(name) > 60 {
		name = name[:60]
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to test PostgreSQL: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	db := &DB{Name: name, DSN: withDB(t, admin, name, false), ReplDSN: withDB(t, admin, name, true), adminDSN: admin}
	t.Cleanup(func() { db.drop(t) })
	return db
}

func (db *DB) drop(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, db.adminDSN)
	if err != nil {
		t.Logf("pgtest cleanup: %v", err)
		return
	}
	defer conn.Close(ctx)
	for i := 0; i < 50; i++ {
		_, _ = conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = $1 AND active_pid IS NOT NULL`, db.Name)
		_, err = conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1`, db.Name)
		if err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Logf("pgtest cleanup: drop slots of %s: %v", db.Name, err)
	}
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db.Name}.Sanitize()+" WITH (FORCE)"); err != nil {
		t.Logf("pgtest cleanup: drop database %s: %v", db.Name, err)
	}
}

// Conn opens a connection to the test database, closed at cleanup.
func (db *DB) Conn(t testing.TB) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatalf("connect to %s: %v", db.Name, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// Exec runs one statement on the test database and fails the test on error.
func (db *DB) Exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatalf("connect to %s: %v", db.Name, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
}

func withDB(t testing.TB, dsn, db string, repl bool) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		t.Fatalf("DELTABUS_TEST_PG must be a URL DSN (postgres://user@host:port/db): %q", dsn)
	}
	u.Path = "/" + db
	q := u.Query()
	if repl {
		q.Set("replication", "database")
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// SystemID returns the cluster's system identifier (decimal), what a
// relay's source identity and appId are built from.
func (db *DB) SystemID(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var id string
	if err := db.Conn(t).QueryRow(ctx, "SELECT system_identifier::text FROM pg_control_system()").Scan(&id); err != nil {
		t.Fatalf("system identifier of %s: %v", db.Name, err)
	}
	return id
}

// AppID returns the appId a relay on slot of this database commits under
// in a store of its own: "deltabus-<system identifier>-<slot>"
// (catalog.Source.AppID, which the tests check it against).
func (db *DB) AppID(t testing.TB, slot string) string {
	return "deltabus-" + db.SystemID(t) + "-" + slot
}
