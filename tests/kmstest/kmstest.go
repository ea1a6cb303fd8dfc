// Package kmstest gives tests a real AWS-KMS-compatible server on
// 127.0.0.1: local-kms (github.com/nsmithuk/local-kms), seeded with one
// AES key, started once per test binary, or the server named by
// DELTABUS_TEST_KMS (http://127.0.0.1:PORT, started by scripts/services.sh
// with the same seed).
//
// Use it from TestMain: os.Exit(kmstest.Run(m)) (it composes with
// pgtest.Run and s3test.Run through Wrap).
//
// The binary is found at $DELTABUS_LOCALKMS, in the cache directory
// (~/.cache/deltabus/bin/local-kms, where scripts/deps.sh installs it) or
// in $(go env GOPATH)/bin. When there is neither a binary nor a server, a
// test that needs one is skipped with a message saying how to get one —
// except in CI (CI set) or with DELTABUS_REQUIRE_KMS set, where it fails:
// `make test` always has one.
//
// local-kms listens on every interface (it takes only a port); tests talk
// to it on 127.0.0.1 only, and it lives as long as the test binary.
package kmstest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/deltabus/deltabus/tests/procserver"
)

// Module is the local-kms version scripts/deps.sh installs.
const Module = "github.com/nsmithuk/local-kms@v0.0.0-20260228092603-2a5e92d09ab6"

// The seeded key and where local-kms says it lives.
const (
	KeyID   = "8d2cbd3e-4d0b-4b5a-9a3c-2f4e7c1a9b01"
	Region  = "eu-west-2"
	Account = "111122223333"
	// Seed is the seed file (KMS_SEED_PATH) of a server with the key.
	Seed = "Keys:\n  Symmetric:\n    Aes:\n      - Metadata:\n          KeyId: " + KeyID +
		"\n        BackingKeys:\n          - 1f3c0e5a7b9d2f4e6a8c0b1d3f5e7a9c2b4d6f8e0a1c3e5f7b9d1f3a5c7e9b0d\n"
)

// Server is a running KMS endpoint.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT
	cmd      *exec.Cmd
	dir      string
	done     chan struct{}
}

// KEKURI is the DELTABUS_KEK of the seeded key.
func (s *Server) KEKURI() string {
	return fmt.Sprintf("aws-kms://arn:aws:kms:%s:%s:key/%s", Region, Account, KeyID)
}

// Env is what a process needs to reach the server through the AWS SDK's
// default configuration (a relay started by a test).
func (s *Server) Env() []string {
	return []string{"AWS_ENDPOINT_URL_KMS=" + s.Endpoint, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"AWS_REGION=" + Region, "AWS_EC2_METADATA_DISABLED=true"}
}

var (
	mu      sync.Mutex
	once    sync.Once
	shared  *Server
	errOpen error
)

// Runner is what TestMain has.
type Runner interface{ Run() int }

type wrapped struct{ m Runner }

func (w wrapped) Run() int { return Run(w.m) }

// Wrap composes harnesses: os.Exit(pgtest.Run(kmstest.Wrap(m))).
func Wrap(m Runner) Runner { return wrapped{m} }

// Run runs the tests, then stops a server the harness started.
func Run(m Runner) int {
	code := m.Run()
	mu.Lock()
	defer mu.Unlock()
	if shared != nil {
		shared.stop()
	}
	return code
}

// Get returns the shared server, starting it on first use, and points this
// process's AWS SDK at it (AWS_ENDPOINT_URL_KMS and test credentials). It
// skips the test when no server can be had outside CI, and fails it in CI.
func Get(t testing.TB) *Server {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	once.Do(func() {
		shared, errOpen = start()
		if errOpen == nil {
			for _, kv := range shared.Env() {
				k, v, _ := strings.Cut(kv, "=")
				os.Setenv(k, v)
			}
		}
	})
	if errors.Is(errOpen, errNoBinary) && os.Getenv("CI") == "" && os.Getenv("DELTABUS_REQUIRE_KMS") == "" {
		t.Skipf("kmstest: no KMS server: %v (`make test` installs and starts one; or run `bash scripts/deps.sh localkms`)", errOpen)
	}
	if errOpen != nil {
		t.Fatalf("kmstest: %v", errOpen)
	}
	return shared
}

var errNoBinary = errors.New("no local-kms binary and DELTABUS_TEST_KMS is not set")

func start() (*Server, error) {
	if ep := os.Getenv("DELTABUS_TEST_KMS"); ep != "" {
		s := &Server{Endpoint: strings.TrimRight(ep, "/")}
		if err := procserver.WaitHTTP(s.Endpoint, nil, 10*time.Second); err != nil {
			return nil, fmt.Errorf("DELTABUS_TEST_KMS %s: %w", ep, err)
		}
		return s, nil
	}
	bin := findBinary()
	if bin == "" {
		return nil, errNoBinary
	}
	var last error
	for range 3 { // a free port may be taken between probe and bind
		s, err := startBinary(bin)
		if err == nil {
			return s, nil
		}
		last = err
	}
	return nil, last
}

func findBinary() string {
	cands := []string{os.Getenv("DELTABUS_LOCALKMS")}
	if dir, err := os.UserCacheDir(); err == nil {
		cands = append(cands, filepath.Join(dir, "deltabus", "bin", "local-kms"))
	}
	cands = append(cands, "/root/.cache/deltabus/bin/local-kms")
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		cands = append(cands, filepath.Join(strings.Split(strings.TrimSpace(string(out)), string(os.PathListSeparator))[0], "bin", "local-kms"))
	}
	for _, p := range cands {
		if fi, err := os.Stat(p); p != "" && err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

func startBinary(bin string) (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "deltabus-kmstest-*")
	if err != nil {
		return nil, err
	}
	seed := filepath.Join(dir, "seed.yaml")
	if err := os.WriteFile(seed, []byte(Seed), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "local-kms.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port), "KMS_SEED_PATH="+seed,
		"KMS_DATA_PATH="+filepath.Join(dir, "data"), "KMS_REGION="+Region, "KMS_ACCOUNT_ID="+Account)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &Server{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	if err := procserver.WaitHTTP(s.Endpoint, s.done, 15*time.Second); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "local-kms.log"))
		s.stop()
		return nil, fmt.Errorf("local-kms on port %d: %w\n%s", port, err, log)
	}
	return s, nil
}

// stop kills a started server and removes its directory.
func (s *Server) stop() { procserver.Stop(s.cmd, s.done, s.dir) }
