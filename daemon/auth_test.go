package daemon

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

const testToken = "0123456789abcdef0123456789abcdef"

func get(t *testing.T, url string, auth func(*http.Request)) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if auth != nil {
		auth(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func bearer(tok string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
}

// TestTokenGuardsThePage: with a token, the page, /api/status and pprof
// answer only requests that carry it (bearer, or a browser's basic
// authentication); the health checks stay open, and /metrics too unless
// asked.
func TestTokenGuardsThePage(t *testing.T) {
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "page "+r.URL.Path) })
	for _, metricsToken := range []bool{false, true} {
		var logs bytes.Buffer
		addr, stop, err := Serve(HTTPOptions{Addr: "127.0.0.1:0", Gatherer: prometheus.NewRegistry(), Page: page, Pprof: true,
			Token: testToken, MetricsToken: metricsToken, Log: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		base := "http://" + addr
		for _, p := range []string{"/", "/api/status", "/debug/pprof/", "/anything"} {
			if code, body := get(t, base+p, nil); code != http.StatusUnauthorized || strings.Contains(body, "page") {
				t.Fatalf("%s without the token: %d %q", p, code, body)
			}
			if code, _ := get(t, base+p, bearer(testToken+"x")); code != http.StatusUnauthorized {
				t.Fatalf("%s with a wrong token: %d", p, code)
			}
			if code, _ := get(t, base+p, func(r *http.Request) { r.SetBasicAuth(testToken, "") }); code != http.StatusUnauthorized {
				t.Fatalf("%s with the token as the user name: %d", p, code)
			}
			if code, _ := get(t, base+p, bearer(testToken)); code != http.StatusOK {
				t.Fatalf("%s with the token: %d", p, code)
			}
			if code, _ := get(t, base+p, func(r *http.Request) { r.SetBasicAuth("operator", testToken) }); code != http.StatusOK {
				t.Fatalf("%s with basic authentication: %d", p, code)
			}
		}
		for _, p := range []string{"/healthz", "/readyz"} {
			if code, _ := get(t, base+p, nil); code != http.StatusOK {
				t.Fatalf("%s without the token: %d", p, code)
			}
		}
		code, _ := get(t, base+"/metrics", nil)
		if want := map[bool]int{false: 200, true: 401}[metricsToken]; code != want {
			t.Fatalf("/metrics (token asked: %v) without the token: %d, want %d", metricsToken, code, want)
		}
		if code, _ := get(t, base+"/metrics", bearer(testToken)); code != http.StatusOK {
			t.Fatalf("/metrics with the token: %d", code)
		}
		resp, _ := http.Get(base + "/")
		if resp.Header.Values("WWW-Authenticate") == nil {
			t.Fatal("no challenge: a browser would not ask for the token")
		}
		resp.Body.Close()
		if strings.Contains(logs.String(), testToken) {
			t.Fatal("the token is in the log")
		}
		stop()
	}
}

func TestLoadToken(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	os.WriteFile(file, []byte(testToken+"\n"), 0o600)
	if tok, err := LoadToken(file, ""); err != nil || tok != testToken {
		t.Fatalf("file: %q %v", tok, err)
	}
	if tok, err := LoadToken("", testToken); err != nil || tok != testToken {
		t.Fatalf("env: %q %v", tok, err)
	}
	if tok, err := LoadToken("", ""); err != nil || tok != "" {
		t.Fatalf("none: %q %v", tok, err)
	}
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("secret-but-short"), 0o600)
	for name, c := range map[string][2]string{
		"short file": {short, ""}, "short env": {"", "secret-but-short"}, "both": {file, testToken},
		"missing file": {filepath.Join(dir, "none"), ""}, "empty file": {os.DevNull, ""},
	} {
		_, err := LoadToken(c[0], c[1])
		if err == nil || strings.Contains(err.Error(), "secret-but-short") || strings.Contains(err.Error(), testToken) {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

func TestOpenPageWarns(t *testing.T) {
	page := http.NotFoundHandler()
	if w := openWarning("127.0.0.1:9464", HTTPOptions{Page: page}); w != "" {
		t.Fatalf("loopback: %s", w)
	}
	if w := openWarning("[::]:9464", HTTPOptions{Page: page}); !strings.Contains(w, "no token") {
		t.Fatalf("every interface: %q", w)
	}
	if w := openWarning("[::]:9464", HTTPOptions{Page: page, Token: testToken}); w != "" {
		t.Fatalf("with a token: %s", w)
	}
}
