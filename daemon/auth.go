package daemon

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/deltabus/deltabus/usererr"
)

// The operator's page and /api/status name topics, their owners, the
// sources (system identifiers, databases, slots), consumer groups and
// dead-letter reasons; /debug/pprof/ exposes the process's internals. A
// token (HTTPOptions.Token) keeps them to those who hold it. /healthz and
// /readyz stay open: they say ok or why not ready, nothing else, and the
// kubelet's probes carry no credentials. /metrics stays open unless
// HTTPOptions.MetricsToken: Prometheus scrapes without credentials by
// default, and its series name topics and sources but carry no owners,
// groups' positions or dead-letter reasons; a scraper that sends the token
// (Prometheus's authorization.credentials_file) can have it closed too.

// MinTokenLen is the shortest token accepted: 128 bits in hex.
const MinTokenLen = 32

// LoadToken returns the status token from the file named by file, else
// value (the DELTABUS_STATUS_TOKEN variable), else "" (no token). The
// token is never printed: an error names the file, never its content.
func LoadToken(file, value string) (string, error) {
	if file != "" && value != "" {
		return "", usererr.New(nil, "set DELTABUS_STATUS_TOKEN or --status-token-file (DELTABUS_STATUS_TOKEN_FILE), not both")
	}
	what := "DELTABUS_STATUS_TOKEN"
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", usererr.New(err, "--status-token-file %s: %v", file, unwrapPathErr(err))
		}
		value, what = string(b), "--status-token-file "+file
	}
	value = strings.TrimSpace(value)
	if file == "" && value == "" {
		return "", nil
	}
	if len(value) < MinTokenLen || strings.ContainsAny(value, " \t\r\n") {
		return "", usererr.New(nil, "%s: the status token must be at least %d characters without spaces (e.g. openssl rand -hex 32)", what, MinTokenLen)
	}
	return value, nil
}

func unwrapPathErr(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// requireToken serves h only to a request that carries token: as
// "Authorization: Bearer TOKEN" (scripts, Prometheus), or as the password
// of HTTP Basic authentication with any user name (browsers, which then
// send it with the page's own requests). Anything else is 401.
func requireToken(token string, h http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := sha256.Sum256([]byte(presented(r)))
		if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Add("WWW-Authenticate", `Bearer realm="deltabus"`)
		w.Header().Add("WWW-Authenticate", `Basic realm="deltabus", charset="UTF-8"`)
		http.Error(w, "401 unauthorized: send the status token (Authorization: Bearer TOKEN, or as the password of basic authentication)", http.StatusUnauthorized)
	})
}

// presented is the token a request carries ("" when none).
func presented(r *http.Request) string {
	auth := r.Header.Get("Authorization")
	scheme, rest, _ := strings.Cut(auth, " ")
	switch strings.ToLower(scheme) {
	case "bearer":
		return strings.TrimSpace(rest)
	case "basic":
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
		if err != nil {
			return ""
		}
		_, pass, _ := strings.Cut(string(b), ":")
		return pass
	}
	return ""
}

// openWarning is the line Serve logs when the page is served without a
// token on an address others can reach ("" when there is nothing to say).
func openWarning(addr string, o HTTPOptions) string {
	if o.Token != "" || (o.Page == nil && !o.Pprof) || loopback(addr) {
		return ""
	}
	return fmt.Sprintf("the operator's page, /api/status%s on %s have no token: whoever reaches the address reads topic names, owners, sources, consumer groups and dead-letter reasons; "+
		"set DELTABUS_STATUS_TOKEN_FILE (or DELTABUS_STATUS_TOKEN), or keep --metrics-addr on loopback", map[bool]string{true: " and /debug/pprof/", false: ""}[o.Pprof], addr)
}

// loopback reports whether a listener's address accepts only local
// connections.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
