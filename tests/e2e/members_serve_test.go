package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a certificate for 127.0.0.1 and its key; it returns
// their paths and a pool that trusts the certificate.
func selfSigned(t *testing.T) (cert, key string, pool *x509.CertPool) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "deltabus-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return cert, key, pool
}

// TestServeTokensAndTLS: relay serve without tokens refuses a reachable
// address with one line (from --addr or DELTABUS_SERVE_ADDR); with a
// token file and a certificate it serves HTTPS, answers /healthz, refuses
// requests without a valid token (401) and serves a granted one; a bad
// token file is refused at start with one line that does not print it.
func TestServeTokensAndTLS(t *testing.T) {
	storeURL, _ := localStore(t)
	env := []string{"DELTABUS_STORE=" + storeURL}
	for _, c := range []struct {
		env  []string
		args []string
	}{
		{env, []string{"serve", "--addr", "0.0.0.0:0"}},
		{append(env, "DELTABUS_SERVE_ADDR=:18089"), []string{"serve"}},
	} {
		_, errOut, code := runRelayCmd(t, c.env, c.args...)
		if code != 2 || !strings.Contains(errOut, "not a loopback address") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Fatalf("relay %v without tokens: exit %d, %q; want exit 2 and one line", c.args, code, errOut)
		}
	}
	dir := t.TempDir()
	token := "3c9f1d0b7e2a4f6b8d5c1a9e0f7b2d4c"
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(filepath.Join(dir, "bad"), []byte(token+" colour=red\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runRelayCmd(t, env, "serve", "--token-file", filepath.Join(dir, "bad")); code != 2 ||
		strings.Contains(errOut, token) || !strings.Contains(errOut, "line 1") {
		t.Fatalf("a bad token file: exit %d, %q", code, errOut)
	}
	if err := os.WriteFile(tokens, []byte("# consumers\n"+token+" name=billing groups=billing topics=orders\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, key, pool := selfSigned(t)
	addr := freeAddr(t)
	p := startProc(t, buildRelay(t), env, "serve", "--addr", addr, "--token-file", tokens, "--tls-cert", cert, "--tls-key", key)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	base := "https://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if done, perr := p.exited(); done || time.Now().After(deadline) {
			t.Fatalf("relay serve over TLS did not come up: %v %v\n%s", err, perr, p.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
	post := func(path, tok string) int {
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(`{"member":"m1","wait_ms":0}`))
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		path, token string
		code        int
	}{
		{"/v1/groups/billing/topics/orders/receive", "", 401},
		{"/v1/groups/billing/topics/orders/receive", "not-the-token-of-this-server", 401},
		{"/v1/groups/shipping/topics/orders/receive", token, 403},
		{"/v1/groups/billing/topics/orders/receive", token, 200},
	} {
		if got := post(c.path, c.token); got != c.code {
			t.Errorf("POST %s (token %t): %d, want %d", c.path, c.token != "", got, c.code)
		}
	}
	if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Error("the TLS server answered plain HTTP")
		}
	}
}
