package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

const healthcheckHelp = `[--addr host:port] [--timeout 2s]

Asks a running relay whether it is streaming: GET http://ADDR/readyz. Prints
one line and exits 0 when the relay answers 200, 1 otherwise (not streaming
yet, a standby waiting for the slot, not listening, timeout), so it serves as
a container health check in images without a shell or curl:
  healthcheck: {test: ["CMD", "/relay", "healthcheck"]}

--addr defaults to DELTABUS_METRICS_ADDR, the address "relay run" listens on,
else 127.0.0.1:9464. A wildcard listen address (0.0.0.0:9464, :9464, [::]:9464)
is reached on the loopback address. Bad flags exit 1 too: Docker reserves
exit code 2 in health checks.`

// healthcheckBodyMax bounds what is read of the answer: one short line.
const healthcheckBodyMax = 512

func cmdHealthcheck(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "healthcheck", healthcheckHelp)
	addr := fs.String("addr", envOr(env, "DELTABUS_METRICS_ADDR", "127.0.0.1:9464"), "the relay's --metrics-addr (env DELTABUS_METRICS_ADDR)")
	timeout := fs.Duration("timeout", 2*time.Second, "give up after this long")
	if code, ok := parseFlags(fs, args); !ok {
		if code == exitOK {
			return exitOK
		}
		return exitFailure
	}
	if *timeout <= 0 {
		return fail(env, exitFailure, fmt.Errorf("healthcheck: --timeout %v must be positive", *timeout))
	}
	url, err := readyzURL(*addr)
	if err != nil {
		return fail(env, exitFailure, fmt.Errorf("healthcheck: %w", err))
	}
	status, err := getReadyz(ctx, url, *timeout)
	if err != nil {
		return fail(env, exitFailure, fmt.Errorf("healthcheck: not ready: %w", err))
	}
	fmt.Fprintf(env.stdout, "relay healthcheck: ready (%s)\n", status)
	return exitOK
}

// readyzURL turns a listen address into the URL of its /readyz endpoint;
// a wildcard host becomes the loopback address of the same family.
func readyzURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return "", fmt.Errorf("--addr %q: want host:port, e.g. 127.0.0.1:9464", addr)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz", nil
}

// getReadyz returns the relay's one-line answer when it is 200 OK, and an
// error naming the status or the failure otherwise.
func getReadyz(ctx context.Context, url string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("GET %s: %w", url, err)
	}
	client := &http.Client{
		Transport:     &http.Transport{Proxy: nil, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return "", fmt.Errorf("GET %s: no answer within %v", url, timeout)
		}
		return "", fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, healthcheckBodyMax))
	if err != nil {
		return "", fmt.Errorf("GET %s: %s, reading the answer: %w", url, resp.Status, err)
	}
	line := oneLine(string(body))
	if resp.StatusCode != http.StatusOK {
		if line == "" {
			return "", fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, line)
	}
	return line, nil
}

// oneLine keeps the first line of s, printable ASCII only.
func oneLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, strings.TrimSpace(s))
}
