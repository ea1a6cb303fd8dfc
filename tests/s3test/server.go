package s3test

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/deltabus/deltabus/tests/procserver"
)

// Test credentials of the versitygw the harness starts.
const (
	AccessKey = "test"
	SecretKey = "testsecret"
	Region    = "us-east-1"
)

// server is one S3 endpoint shared by the tests of a binary.
type server struct {
	endpoint  string
	accessKey string
	secretKey string

	cmd  *exec.Cmd // nil for an external server
	dir  string    // temp dir of a started server
	done chan struct{}
}

var (
	shared     *server
	sharedErr  error
	sharedOnce sync.Once
	sharedMu   sync.Mutex
)

// Runner is what TestMain has: *testing.M, or a wrapper that composes
// several harnesses (it matches pgtest.Runner).
type Runner interface{ Run() int }

// Wrap returns a Runner that runs m and then stops the S3 server, so
// harnesses compose: os.Exit(pgtest.Run(s3test.Wrap(m))).
func Wrap(m Runner) Runner { return wrapped{m} }

type wrapped struct{ m Runner }

func (w wrapped) Run() int { return Run(w.m) }

// Run runs the tests and then stops the server the harness started, if any.
// Call it from TestMain: os.Exit(s3test.Run(m)).
func Run(m Runner) int {
	code := m.Run()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.stop()
	}
	return code
}

// getServer returns the shared server, starting it on first use.
func getServer() (*server, error) {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	sharedOnce.Do(func() { shared, sharedErr = newServer() })
	return shared, sharedErr
}

func newServer() (*server, error) {
	if raw := os.Getenv("DELTABUS_TEST_S3"); raw != "" {
		return externalServer(raw)
	}
	bin, err := FindVersitygw()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 3 { // a free port may be taken between probe and bind
		s, err := startVersitygw(bin)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// externalServer parses DELTABUS_TEST_S3=http://ACCESS:SECRET@HOST:PORT.
func externalServer(raw string) (*server, error) {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil || u.Host == "" {
		return nil, fmt.Errorf("DELTABUS_TEST_S3 must look like http://ACCESS:SECRET@127.0.0.1:PORT")
	}
	secret, _ := u.User.Password()
	s := &server{
		endpoint:  u.Scheme + "://" + u.Host,
		accessKey: u.User.Username(),
		secretKey: secret,
	}
	if err := procserver.WaitHTTP(s.endpoint, nil, 10*time.Second); err != nil {
		return nil, fmt.Errorf("DELTABUS_TEST_S3 server %s: %w", s.endpoint, err)
	}
	return s, nil
}

func startVersitygw(bin string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "deltabus-s3test-*")
	if err != nil {
		return nil, fmt.Errorf("versitygw temp dir: %w", err)
	}
	data := filepath.Join(dir, "data")
	logf, err := setupDir(dir, data)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logf.Close()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(bin, "--access", AccessKey, "--secret", SecretKey,
		"--port", addr, "--quiet", "posix", data)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &server{endpoint: "http://" + addr, accessKey: AccessKey, secretKey: SecretKey,
		cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	if err := procserver.WaitHTTP(s.endpoint, s.done, 15*time.Second); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "versitygw.log"))
		s.stop()
		return nil, fmt.Errorf("versitygw on %s: %w\n%s", addr, err, log)
	}
	return s, nil
}

func setupDir(dir, data string) (*os.File, error) {
	if err := os.Mkdir(data, 0o755); err != nil {
		return nil, fmt.Errorf("versitygw data dir: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "versitygw.log"))
	if err != nil {
		return nil, fmt.Errorf("versitygw log: %w", err)
	}
	return f, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// stop kills a started server and removes its directory.
func (s *server) stop() { procserver.Stop(s.cmd, s.done, s.dir) }
