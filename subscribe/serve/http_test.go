package serve_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/deltabus/deltabus/subscribe/members"
	"github.com/deltabus/deltabus/subscribe/members/memberstest"
	"github.com/deltabus/deltabus/subscribe/serve"
)

func post(t *testing.T, url, token, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("POST %s: answer %d is not JSON: %q", url, resp.StatusCode, raw)
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := out["error"].(string)
		if msg == "" || strings.Contains(msg, "\n") {
			t.Fatalf("POST %s: %d without one error line: %q", url, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode, out
}

// TestBadRequestsGetOneLine: malformed bodies, unknown fields, bad
// values, unknown paths and methods get a 4xx and one JSON error line,
// never a 500 or a hang.
func TestBadRequestsGetOneLine(t *testing.T) {
	root := localRoot(t)
	memberstest.NewTopic(t, root, "orders").CommitKeyed(3, 3)
	srv, gs := startServer(t, root, serve.Config{})
	defer gs.Close()
	defer srv.Close()
	g := srv.URL + "/v1/groups/g/topics/orders"
	for _, c := range []struct {
		path, body string
		code       int
	}{
		{"/receive", ``, 400},
		{"/receive", `{`, 400},
		{"/receive", `[]`, 400},
		{"/receive", `{"member":"m"} {}`, 400},
		{"/receive", `{"member":"m","visiblity_ms":100}`, 400},
		{"/receive", `{"member":"m","max":0}`, 400},
		{"/receive", `{"member":"m","max":"ten"}`, 400},
		{"/receive", `{"member":"m","wait_ms":-1}`, 400},
		{"/receive", `{"member":"m","wait_ms":99999999999999999}`, 400},
		{"/receive", `{"member":"m","visibility_ms":0}`, 400},
		{"/receive", `{"member":""}`, 400},
		{"/receive", `{"member":"m","want_version":{"T":0}}`, 400},
		{"/ack", `{}`, 400},
		{"/ack", `{"ack_ids":["x"]}`, 400},
		{"/ack", `{"ack_ids":[1]}`, 400},
		{"/ack", `{"ack_ids":["1-2-3-4"],"retry_after_ms":5}`, 400},
		{"/nack", `{"ack_ids":["1-2-3-4"],"retry_after_ms":-5}`, 400},
		{"/reset", `{}`, 400},
		{"/reset", `{"version":1,"latest":true}`, 400},
		{"/reset", `{"version":-1}`, 400},
		{"/reset", `{"time":"yesterday"}`, 400},
		{"/reset", `{"version":99}`, 400},
		{"/unknown", `{}`, 404},
	} {
		code, out := post(t, g+c.path, "", c.body)
		if code != c.code {
			t.Errorf("POST %s %s: %d %v; want %d", c.path, c.body, code, out, c.code)
		}
	}
	if code, _ := post(t, srv.URL+"/v1/groups/Bad/topics/orders/receive", "", `{"member":"m"}`); code != 400 {
		t.Errorf("invalid group name: %d", code)
	}
	if code, _ := post(t, srv.URL+"/v1/groups/g/topics/nothere/reset", "", `{"latest":true}`); code != 404 {
		t.Errorf("reset of a topic without a table: %d", code)
	}
	big := `{"ack_ids":["` + strings.Repeat("x", 2<<20) + `"]}`
	if code, _ := post(t, g+"/ack", "", big); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a 2 MiB body: %d", code)
	}
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
}

// TestTokens: without a token, with an unknown one, and with one not
// granted the group or topic, requests are refused; a granted token
// works, and a changed file is read again.
func TestTokens(t *testing.T) {
	root := localRoot(t)
	tp := memberstest.NewTopic(t, root, "orders")
	tp.CommitKeyed(2, 2)
	memberstest.NewTopic(t, root, "payments")
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens")
	all, billing := uuid.NewString(), uuid.NewString()
	if err := os.WriteFile(file, []byte("# tokens\n"+all+" name=ops\n\n"+billing+" name=billing groups=billing,billing-* topics=orders\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	toks, err := serve.LoadTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	srv, gs := startServer(t, root, serve.Config{Tokens: toks})
	defer gs.Close()
	defer srv.Close()
	body := `{"member":"m","wait_ms":0}`
	for _, c := range []struct {
		token, group, topic string
		code                int
	}{
		{"", "billing", "orders", 401},
		{"not-a-token-of-the-file", "billing", "orders", 401},
		{billing, "shipping", "orders", 403},
		{billing, "billing", "payments", 403},
		{billing, "billing", "orders", 200},
		{billing, "billing-eu", "orders", 200},
		{all, "shipping", "payments", 200},
	} {
		code, out := post(t, srv.URL+"/v1/groups/"+c.group+"/topics/"+c.topic+"/receive", c.token, body)
		if code != c.code {
			t.Errorf("token set %t on %s/%s: %d %v; want %d", c.token != "", c.group, c.topic, code, out, c.code)
		}
		if msg, _ := out["error"].(string); strings.Contains(msg, billing) || strings.Contains(msg, all) {
			t.Fatalf("an error names the token: %q", msg)
		}
	}
	for _, bad := range []string{"short", all + " groups=", all + " reveal=yes", all + " colour=red", all + "\n" + all} {
		if err := os.WriteFile(filepath.Join(dir, "bad"), []byte(bad+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := serve.LoadTokens(filepath.Join(dir, "bad"))
		if err == nil || strings.Contains(err.Error(), all) {
			t.Errorf("token file %q: %v; want an error that does not print the token", bad, err)
		}
	}
}

// TestWantVersion: a member that declares the version it reads gets
// older events converted by the store's JSON Patch upcasters, and is not
// handed newer ones (another member is) unless it passes them.
func TestWantVersion(t *testing.T) {
	root := localRoot(t)
	tp := memberstest.NewTopic(t, root, "orders")
	tp.Commit(memberstest.Event{ID: "old", Key: "a", Type: "Placed", Version: 1, Payload: `{"amount":5}`},
		memberstest.Event{ID: "new", Key: "b", Type: "Placed", Version: 3, Payload: `{"total":7,"currency":"EUR"}`})
	ctx := context.Background()
	if err := members.SetUpcast(ctx, root, "orders", "Placed", 1, []byte(`[{"op":"move","from":"/amount","path":"/total"}]`)); err != nil {
		t.Fatal(err)
	}
	if err := members.SetUpcast(ctx, root, "orders", "Placed", 2, []byte(`[{"op":"add","path":"/currency","value":"EUR"}]`)); err != nil {
		t.Fatal(err)
	}
	if err := members.SetUpcast(ctx, root, "orders", "Placed", 3, []byte(`{"op":"oops"}`)); err == nil {
		t.Fatal("a patch that is not a JSON Patch was stored")
	}
	ups := members.NewStoreUpcasts(root)
	if err := ups.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	gs := members.New(root, members.Options{PollInterval: 20 * time.Millisecond, Upcasts: ups})
	defer gs.Close()
	srv := httptest.NewServer(serve.New(serve.Config{Groups: gs}))
	defer srv.Close()
	url := srv.URL + "/v1/groups/g/topics/orders/receive"
	code, out := post(t, url, "", `{"member":"v2","max":10,"wait_ms":2000,"want_version":{"Placed":2}}`)
	msgs, _ := out["messages"].([]any)
	if code != 200 || len(msgs) != 1 {
		t.Fatalf("a member reading version 2: %d %v; want the old event alone, converted", code, out)
	}
	ev := msgs[0].(map[string]any)["event"].(map[string]any)
	if ev["event_id"] != "old" || ev["schema_version"] != float64(2) || ev["writer_version"] != float64(1) {
		t.Fatalf("converted event: %v", ev)
	}
	if p, _ := json.Marshal(ev["payload"]); string(p) != `{"total":5}` {
		t.Fatalf("converted payload: %s", p)
	}
	code, out = post(t, url, "", `{"member":"v3","max":10,"wait_ms":2000,"want_version":{"Placed":3}}`)
	msgs, _ = out["messages"].([]any)
	if code != 200 || len(msgs) != 1 || msgs[0].(map[string]any)["event"].(map[string]any)["event_id"] != "new" {
		t.Fatalf("a member reading version 3: %d %v; want the new event", code, out)
	}
}
