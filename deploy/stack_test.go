package deploy

import (
	"bytes"
	"context"
	"encoding/json"
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
	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/pgcluster"
	"github.com/deltabus/deltabus/tests/s3test"
)

// TestComposeStackWithoutDocker runs the services of docker-compose.yml
// and compose/fanin.yml (two source databases, one store) as plain
// processes, each with its command and environment as the Compose loader
// reads them, only the addresses and secret paths rewritten to this
// machine: each PostgreSQL initialised by the init script, the S3 service's
// entrypoint with versitygw, and the relay image's binary, built from the
// context .dockerignore leaves, for migrate, run, healthcheck, reconcile and
// janitor of each source. fanin.yml only adds services
// (TestComposeFaninAddsASource), so docker-compose.yml's run here as they
// would alone. An event inserted into each outbox must reach the shared
// topic table in the bucket, its row naming its source, and the table must
// hold each relay's progress under its own appId.
func TestComposeStackWithoutDocker(t *testing.T) {
	p := loadComposeFiles(t, []string{composeFile, faninFile}, nil, "ops")
	sources := []composeSource{mainSource, billingSource}
	relayBin := buildFromDockerContext(t)
	rw := rewriter{s3Addr: startS3Service(t, service(t, p, "s3")), pgAddrs: map[string]string{}, metricsPorts: map[string]string{}}
	admins := map[composeSource]*pgx.Conn{}
	for _, src := range sources {
		db := envOf(t, service(t, p, src.postgres), "POSTGRES_DB")
		srv := scramServerDB(t, db)
		runInitScriptDB(t, srv, db)
		admins[src] = adminConn(t, srv, db)
		rw.pgAddrs[src.postgres] = "127.0.0.1:" + strconv.Itoa(srv.Port)
		port, err := pgcluster.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		rw.metricsPorts[src.svc("relay")] = strconv.Itoa(port)
	}

	var stops []func() int
	for _, src := range sources {
		if out, err := runService(t, relayBin, rw, service(t, p, src.svc("migrate")), nil); err != nil {
			t.Fatalf("%s: %v\n%s", src.svc("migrate"), err, out)
		}
	}
	for _, src := range sources {
		stops = append(stops, startService(t, relayBin, rw, service(t, p, src.svc("relay"))))
	}
	for _, src := range sources {
		relay := service(t, p, src.svc("relay"))
		hc := relay.HealthCheck.Test[1:] // [/relay healthcheck]
		waitHealthy(t, relayBin, rw, relay, hc[1:])
	}

	// Each source's event, and the appId its relay commits under by
	// default: deltabus-<system identifier>-<slot "deltabus">.
	wantSource := map[string]string{}
	for _, src := range sources {
		key := "o-compose-" + src.postgres
		mustExec(t, admins[src], `INSERT INTO outbox (topic, key, type, payload) VALUES ('orders', $1, 'Created', '{"total": 42}')`, key)
		var sysID string
		if err := admins[src].QueryRow(testCtx(t), "SELECT system_identifier::text FROM pg_control_system()").Scan(&sysID); err != nil {
			t.Fatal(err)
		}
		wantSource[key] = "deltabus-" + sysID + "-deltabus"
	}
	relay := service(t, p, mainSource.svc("relay"))
	table := envOf(t, relay, "DELTABUS_STORE") + "/orders"
	waitFor(t, 60*time.Second, "both sources' events in "+table, func() (bool, string) {
		out, err := runService(t, relayBin, rw, relay, []string{"tail", table})
		return err == nil && strings.Count(out, "o-compose-") == len(sources), out
	})
	out, err := runService(t, relayBin, rw, relay, []string{"tail", table})
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var row struct{ Key, Source string }
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("tail %s: %v in %q", table, err, line)
		}
		if want, ok := wantSource[row.Key]; !ok || row.Source != want {
			t.Errorf("%s: row %q has source %q; want %q", table, row.Key, row.Source, want)
		}
	}
	out, err = runService(t, relayBin, rw, relay, []string{"inspect", "--json", table})
	if err != nil {
		t.Fatalf("inspect %s: %v\n%s", table, err, out)
	}
	var snap struct{ Txns map[string]int64 }
	if err := json.Unmarshal([]byte(out), &snap); err != nil {
		t.Fatalf("inspect %s: %v\n%s", table, err, out)
	}
	for _, app := range wantSource {
		if _, ok := snap.Txns[app]; !ok || len(snap.Txns) != len(sources) {
			t.Errorf("%s: txns %v; want one per source, %s among them", table, snap.Txns, app)
		}
	}

	for _, src := range sources {
		for _, name := range []string{src.svc("reconcile"), src.svc("janitor")} {
			s := service(t, p, name)
			args := withoutFlag(s.Command, "--every") // one pass instead of a loop
			if out, err := runService(t, relayBin, rw, s, args); err != nil {
				t.Fatalf("%s %v: %v\n%s", name, args, err, out)
			}
		}
	}
	for i, stop := range stops {
		if code := stop(); code != 0 {
			t.Fatalf("%s exited %d after SIGTERM; want 0", sources[i].svc("relay"), code)
		}
	}
}

// rewriter maps the compose network to this machine: each PostgreSQL
// service's address, the S3 service's, and each relay's metrics port.
type rewriter struct {
	s3Addr       string
	pgAddrs      map[string]string // compose service -> 127.0.0.1:port
	metricsPorts map[string]string // compose service -> port
}

func (r rewriter) env(t *testing.T, s types.ServiceConfig) []string {
	t.Helper()
	secrets, err := filepath.Abs("compose/secrets")
	if err != nil {
		t.Fatal(err)
	}
	pairs := []string{"/run/secrets/", secrets + "/", "http://s3:7070", "http://" + r.s3Addr}
	for svc, addr := range r.pgAddrs {
		pairs = append(pairs, "@"+svc+":5432/", "@"+addr+"/")
	}
	repl := strings.NewReplacer(pairs...)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range s.Environment {
		val := repl.Replace(*v)
		if k == "DELTABUS_METRICS_ADDR" {
			host, _, err := net.SplitHostPort(val)
			port, ok := r.metricsPorts[s.Name]
			if err != nil || !ok {
				t.Fatalf("%s: DELTABUS_METRICS_ADDR %q (%v), no port for it on this machine", s.Name, val, err)
			}
			val = net.JoinHostPort(host, port)
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
