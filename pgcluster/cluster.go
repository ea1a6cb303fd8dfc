// Package pgcluster starts throwaway PostgreSQL clusters with logical
// replication on 127.0.0.1: for `relay demo` and for tests. A cluster is
// initdb'd into a temp directory as the postgres user (PostgreSQL refuses to
// run as root), listens on a free port, has wal_level=logical and trades
// durability for speed (fsync off). Stop removes every file it made.
//
// A cluster runs one installed major version's binaries (versions.go):
// StartServer the default one, StartVersion the one asked for; every
// Server reports the major it runs.
package pgcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// BinDir is where the PostgreSQL server binaries are looked for first;
// DELTABUS_PG_BIN overrides it.
const BinDir = "/usr/lib/postgresql/15/bin"

// Server is a throwaway PostgreSQL cluster started by this package.
// Its methods are safe to call from one goroutine at a time.
type Server struct {
	Dir     string // temp dir holding data/, the socket and pg.log
	DataDir string
	Port    int
	Major   int // the PostgreSQL major version it runs (its PG_VERSION)
	bin     string
}

func binDir() string {
	if d := os.Getenv("DELTABUS_PG_BIN"); d != "" {
		return d
	}
	return BinDir
}

// StartServer initialises and starts a new cluster of the default major
// version (DefaultMajor). Extra lines are appended to postgresql.conf (e.g.
// "max_slot_wal_keep_size = 16MB").
func StartServer(ctx context.Context, extraConf ...string) (*Server, error) {
	bin, err := defaultBinDir()
	if err != nil {
		return nil, err
	}
	return startIn(ctx, bin, extraConf)
}

// StartVersion is StartServer with the binaries of an installed major
// version (Installed); a major that is not installed is an error that says
// how to install it.
func StartVersion(ctx context.Context, major int, extraConf ...string) (*Server, error) {
	bin, err := BinDirOf(major)
	if err != nil {
		return nil, err
	}
	return startIn(ctx, bin, extraConf)
}

func startIn(ctx context.Context, bin string, extraConf []string) (*Server, error) {
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		return nil, fmt.Errorf("PostgreSQL server binaries not found in %s (install postgresql-15 or set DELTABUS_PG_BIN): %w", bin, err)
	}
	dir, err := os.MkdirTemp("", "deltabus-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, DataDir: filepath.Join(dir, "data"), bin: bin}
	if err := s.initAndStart(ctx, extraConf); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// initAndStart runs initdb (as it runs on every major from 13 on), writes
// the settings and starts the server.
func (s *Server) initAndStart(ctx context.Context, extraConf []string) error {
	if err := chownToPostgres(s.Dir); err != nil {
		return err
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	s.Port = port
	if out, err := s.pgRun(ctx, "initdb", "-D", s.DataDir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		return fmt.Errorf("initdb: %w: %s", err, out)
	}
	if s.Major, err = dataMajor(s.DataDir); err != nil {
		return err
	}
	conf := []string{
		"listen_addresses = '127.0.0.1'",
		"port = " + strconv.Itoa(port),
		"unix_socket_directories = '" + s.Dir + "'",
		"wal_level = logical",
		"max_replication_slots = 64",
		"max_wal_senders = 64",
		"max_connections = 200",
		"fsync = off",
		"synchronous_commit = off",
		"full_page_writes = off",
		"wal_sender_timeout = 60s",
		"shared_buffers = 256MB",
		"max_wal_size = 4GB",
		"log_min_messages = warning",
	}
	conf = append(conf, extraConf...)
	if err := appendConf(s.DataDir, conf); err != nil {
		return err
	}
	return s.start(ctx)
}

// dataMajor reads the major version a data directory was made by.
func dataMajor(dataDir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "PG_VERSION"))
	if err != nil {
		return 0, err
	}
	m, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s/PG_VERSION: %q is not a major version", dataDir, b)
	}
	return m, nil
}

func (s *Server) start(ctx context.Context) error {
	out, err := s.pgRun(ctx, "pg_ctl", "-D", s.DataDir, "-l", filepath.Join(s.Dir, "pg.log"), "-w", "-t", "60", "start")
	if err != nil {
		return fmt.Errorf("pg_ctl start: %w: %s (log: %s)", err, out, s.logTail())
	}
	return nil
}

// DSN returns a connection string for database db on this server.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

// Restart restarts the server with "pg_ctl restart -m fast", dropping every
// connection, as an operator would.
func (s *Server) Restart(ctx context.Context) error {
	out, err := s.pgRun(ctx, "pg_ctl", "-D", s.DataDir, "-l", filepath.Join(s.Dir, "pg.log"), "-w", "-t", "60", "-m", "fast", "restart")
	if err != nil {
		return fmt.Errorf("pg_ctl restart: %w: %s", err, out)
	}
	return nil
}

// StopServer stops the cluster (fast mode) but keeps its files.
func (s *Server) StopServer(ctx context.Context) error {
	out, err := s.pgRun(ctx, "pg_ctl", "-D", s.DataDir, "-w", "-t", "60", "-m", "fast", "stop")
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %w: %s", err, out)
	}
	return nil
}

// StartAgain starts a stopped cluster.
func (s *Server) StartAgain(ctx context.Context) error { return s.start(ctx) }

// Stop stops the cluster and removes its files.
func (s *Server) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _ = s.pgRun(ctx, "pg_ctl", "-D", s.DataDir, "-w", "-t", "60", "-m", "immediate", "stop")
	_ = os.RemoveAll(s.Dir)
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "pg.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// pgRun runs a PostgreSQL binary as the postgres user when we are root.
func (s *Server) pgRun(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, name), args...)
	cmd.Dir = s.Dir
	if os.Geteuid() == 0 {
		uid, gid, err := postgresIDs()
		if err != nil {
			return nil, err
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
		cmd.Env = append(os.Environ(), "HOME="+s.Dir)
	}
	return cmd.CombinedOutput()
}

func postgresIDs() (uint32, uint32, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return 0, 0, fmt.Errorf("PostgreSQL refuses to run as root and there is no postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uint32(uid), uint32(gid), nil
}

func chownToPostgres(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	uid, gid, err := postgresIDs()
	if err != nil {
		return err
	}
	return os.Chown(dir, int(uid), int(gid))
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Kill kills the postmaster with SIGKILL, as a crash or an OOM killer
// would, and waits until the server can be started again (StartAgain runs
// crash recovery).
func (s *Server) Kill(ctx context.Context) error {
	b, err := os.ReadFile(filepath.Join(s.DataDir, "postmaster.pid"))
	if err != nil {
		return fmt.Errorf("read postmaster.pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		return fmt.Errorf("postmaster.pid: %w", err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill postmaster %d: %w", pid, err)
	}
	for alive(pid) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// alive reports whether a process exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}
