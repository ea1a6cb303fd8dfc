package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStatusToken: relay run with a status token (a file, as a Kubernetes
// Secret mounts it) answers the operator's page and /api/status only to
// requests that carry it, keeps /healthz, /readyz and /metrics open, and
// asks /metrics for it too with --metrics-token; the token never reaches
// the log. A token too short is one line, exit 2, naming no token.
func TestStatusToken(t *testing.T) {
	db := setup(t)
	dir := t.TempDir()
	const token = "7c1f0e9a5b3d2c4e6f8a0b1c2d3e4f5a6b7c8d9e0f1a2b3c"
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=file://" + dir, "DELTABUS_STATUS_TOKEN_FILE=" + file}
	get := func(url, tok string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, metricsToken := range []bool{false, true} {
		addr := freeAddr(t)
		args := []string{"--metrics-addr", addr}
		if metricsToken {
			args = append(args, "--metrics-token")
		}
		p := startRelay(t, env, args...)
		base := "http://" + addr
		eventually(t, time.Minute, "the relay serves /healthz", func() bool { return get(base+"/healthz", "") == 200 })
		waitSlotActive(t, db.DSN, "deltabus", p)
		for _, path := range []string{"/", "/api/status"} {
			if code := get(base+path, ""); code != http.StatusUnauthorized {
				t.Fatalf("%s without the token: %d", path, code)
			}
			if code := get(base+path, "not-"+token); code != http.StatusUnauthorized {
				t.Fatalf("%s with a wrong token: %d", path, code)
			}
			if code := get(base+path, token); code != http.StatusOK {
				t.Fatalf("%s with the token: %d", path, code)
			}
		}
		if code := get(base+"/readyz", ""); code != http.StatusOK {
			t.Fatalf("/readyz without the token: %d", code)
		}
		wantMetrics := map[bool]int{false: 200, true: 401}[metricsToken]
		if code := get(base+"/metrics", ""); code != wantMetrics {
			t.Fatalf("/metrics (--metrics-token %v) without the token: %d, want %d", metricsToken, code, wantMetrics)
		}
		if code := get(base+"/metrics", token); code != http.StatusOK {
			t.Fatalf("/metrics with the token: %d", code)
		}
		if err := p.stop(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(p.output(), token) {
			t.Fatal("the token is in the relay's log")
		}
	}
	code, out, errOut := runCLI(t, []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=file://" + dir, "DELTABUS_STATUS_TOKEN=short-secret"},
		"run", "--metrics-addr", freeAddr(t))
	if code != 2 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "at least") || strings.Contains(errOut+out, "short-secret") {
		t.Fatalf("a short token: exit %d\n%s%s", code, out, errOut)
	}
}
