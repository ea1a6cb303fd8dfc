package deploy

import (
	"bytes"
	"context"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/deltabus/deltabus/pgcluster"
	"github.com/deltabus/deltabus/tests/s3test"
)

// TestComposeStackWithoutDocker runs the compose file's services as plain
// processes, each with its command and environment as the Compose loader
// reads them, only the addresses and secret paths rewritten to this
// machine: PostgreSQL initialised by the init script, the S3 service's
// entrypoint with versitygw, and the relay image's binary, built from the
// context .dockerignore leaves, for migrate, run, healthcheck, reconcile and
// janitor. An event inserted into the outbox must reach the Delta table in
// the bucket.
func TestComposeStackWithoutDocker(t *testing.T) {
	p := loadCompose(t, nil, "ops")
	relayBin := buildFromDockerContext(t)
	srv := scramServer(t)
	runInitScript(t, srv)
	s3Addr := startS3Service(t, service(t, p, "s3"))
	metricsPort, err := pgcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	rw := rewriter{pgAddr: "127.0.0.1:" + strconv.Itoa(srv.Port), s3Addr: s3Addr, metricsPort: strconv.Itoa(metricsPort)}

	if out, err := runService(t, relayBin, rw, service(t, p, "migrate"), nil); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	relay := service(t, p, "relay")
	stop := startService(t, relayBin, rw, relay)
	hc := relay.HealthCheck.Test[1:] // [/relay healthcheck]
	waitHealthy(t, relayBin, rw, relay, hc[1:])

	admin := adminConn(t, srv, "app")
	mustExec(t, admin, `INSERT INTO outbox (topic, key, type, payload) VALUES ('orders', 'o-compose-1', 'Created', '{"total": 42}')`)
	store := envOf(t, relay, "DELTABUS_STORE")
	waitFor(t, 60*time.Second, "the event in "+store+"/orders", func() (bool, string) {
		out, err := runService(t, relayBin, rw, relay, []string{"tail", store + "/orders"})
		return err == nil && strings.Contains(out, "o-compose-1"), out
	})

	for _, name := range []string{"reconcile", "janitor"} {
		s := service(t, p, name)
		args := withoutFlag(s.Command, "--every") // one pass instead of a loop
		if out, err := runService(t, relayBin, rw, s, args); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	if code := stop(); code != 0 {
		t.Fatalf("relay exited %d after SIGTERM; want 0", code)
	}
}

// rewriter maps the compose network to this machine.
type rewriter struct{ pgAddr, s3Addr, metricsPort string }

func (r rewriter) env(t *testing.T, s types.ServiceConfig) []string {
	t.Helper()
	secrets, err := filepath.Abs("compose/secrets")
	if err != nil {
		t.Fatal(err)
	}
	repl := strings.NewReplacer("@postgres:5432/", "@"+r.pgAddr+"/", "/run/secrets/", secrets+"/", "http://s3:7070", "http://"+r.s3Addr)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range s.Environment {
		val := repl.Replace(*v)
		if k == "DELTABUS_METRICS_ADDR" {
			host, _, err := net.SplitHostPort(val)
			if err != nil {
				t.Fatal(err)
			}
			val = net.JoinHostPort(host, r.metricsPort)
		}
		env = append(env, k+"="+val)
	}
	return env
}

// runService runs the relay binary with s's environment and args (s's
// command when nil), as `docker compose run` would.
func runService(t *testing.T, bin string, rw rewriter, s types.ServiceConfig, args []string) (string, error) {
	t.Helper()
	if args == nil {
		args = s.Command
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = rw.env(t, s)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// startService starts s's command in the background; stop sends SIGTERM
// and returns the exit code.
func startService(t *testing.T, bin string, rw rewriter, s types.ServiceConfig) (stop func() int) {
	t.Helper()
	cmd := exec.Command(bin, s.Command...)
	cmd.Env = rw.env(t, s)
	cmd.Dir = t.TempDir()
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	stopped := false
	stop = func() int {
		if !stopped {
			stopped = true
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Errorf("%s did not stop within 60s of SIGTERM", s.Name)
			}
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", s.Name, log.String())
		}
		return cmd.ProcessState.ExitCode()
	}
	t.Cleanup(func() { stop() })
	return stop
}

// waitHealthy runs the service's health check until it passes.
func waitHealthy(t *testing.T, bin string, rw rewriter, s types.ServiceConfig, args []string) {
	t.Helper()
	waitFor(t, 90*time.Second, s.Name+" healthy", func() (bool, string) {
		out, err := runService(t, bin, rw, s, args)
		return err == nil && strings.HasPrefix(out, "relay healthcheck: ready"), out
	})
}

func waitFor(t *testing.T, timeout time.Duration, what string, ok func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		done, last := ok()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v; last answer:\n%s", what, timeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func withoutFlag(args []string, flag string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == flag {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// startS3Service runs the s3 service's entrypoint (bucket creation, then
// versitygw) with /data in a temporary directory and the gateway on a free
// loopback port, and waits for its health check URL to answer 200.
func startS3Service(t *testing.T, s types.ServiceConfig) string {
	t.Helper()
	bin, err := s3test.FindVersitygw()
	if err != nil {
		t.Fatal(err)
	}
	port, err := pgcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	data := filepath.Join(t.TempDir(), "data")
	if len(s.Entrypoint) != 3 || s.Entrypoint[0] != "/bin/sh" || s.Entrypoint[1] != "-c" {
		t.Fatalf("s3 entrypoint %v; want [/bin/sh -c SCRIPT]", s.Entrypoint)
	}
	script := strings.ReplaceAll(s.Entrypoint[2], "/data", data)
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = []string{"PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH")}
	for k, v := range s.Environment {
		if k == "VGW_PORT" {
			cmd.Env = append(cmd.Env, k+"="+addr)
			continue
		}
		cmd.Env = append(cmd.Env, k+"="+*v)
	}
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	health := s.HealthCheck.Test[len(s.HealthCheck.Test)-1] // http://127.0.0.1:7070/health
	health = strings.Replace(health, "127.0.0.1:7070", addr, 1)
	waitFor(t, 30*time.Second, "S3 service health at "+health, func() (bool, string) {
		resp, err := http.Get(health)
		if err != nil {
			return false, err.Error() + "\n" + log.String()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status + "\n" + log.String()
	})
	return addr
}

// buildFromDockerContext copies the files .dockerignore lets into the build
// context to a temporary directory and runs the Dockerfile's build command
// there: the context is enough to build the image's binary.
func buildFromDockerContext(t *testing.T) string {
	t.Helper()
	pm := contextMatcher(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	ctxDir := t.TempDir()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if rel == "." {
			return nil
		}
		if excluded(t, pm, rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(ctxDir, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(ctxDir, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "relay")
	// The Dockerfile's build also sets CGO_ENABLED=0 and -trimpath; this one
	// keeps the default flags so that it reuses the build cache of the main
	// module's tests (with those flags every dependency would be compiled
	// again: minutes on two cores). The context is what is under test.
	cmd := exec.Command("go", "build", "-ldflags", "-X main.Version=compose-test", "-o", bin, "./cmd/relay")
	cmd.Dir = ctxDir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/relay in the Docker build context: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.Contains(string(out), "compose-test") {
		t.Fatalf("built relay: %q, %v", out, err)
	}
	return bin
}
