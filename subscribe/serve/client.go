package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/deltabus/deltabus/subscribe"
	"github.com/deltabus/deltabus/subscribe/members"
)

// Client is a members.Source over the HTTP API: Go members of a group
// served by `relay serve`. Safe for concurrent use.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// NewClient returns a client of the server at base (http://host:port or
// https://...). token is sent as a bearer token when not empty; hc nil
// takes a client with a 90 s timeout (a long poll waits up to a minute).
func NewClient(base, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{Timeout: 90 * time.Second}
	}
	return &Client{base: strings.TrimRight(base, "/"), token: token, http: hc}
}

var _ members.Source = (*Client)(nil)

// StatusError is an answer of the server other than 200; RequestError
// (4xx) and unavailable (5xx) errors wrap it.
type StatusError struct {
	Code int
	Msg  string
}

func (e *StatusError) Error() string { return fmt.Sprintf("%d: %s", e.Code, e.Msg) }

func (c *Client) path(group, topic, op string) string {
	p := c.base + "/v1/groups/" + url.PathEscape(group) + "/topics/" + url.PathEscape(topic)
	if op != "" {
		p += "/" + op
	}
	return p
}

// do posts body as JSON to u and decodes the answer into out.
func (c *Client) do(ctx context.Context, u string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return members.Unavailable(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return members.Unavailable(err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(raw, &e)
		se := &StatusError{Code: resp.StatusCode, Msg: e.Error}
		switch {
		case resp.StatusCode >= 500:
			return members.Unavailable(se)
		case resp.StatusCode == http.StatusBadRequest:
			return errors.Join(&members.RequestError{Msg: e.Error}, se)
		}
		return se
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("the server's answer is not the JSON expected: %w", err)
	}
	return nil
}

// Receive implements members.Source.
func (c *Client) Receive(ctx context.Context, group, topic string, r members.ReceiveRequest) ([]members.Message, error) {
	body := map[string]any{"member": r.Member}
	if r.Max != 0 {
		body["max"] = r.Max
	}
	body["wait_ms"] = r.Wait.Milliseconds()
	if r.Visibility != 0 {
		body["visibility_ms"] = r.Visibility.Milliseconds()
	}
	if len(r.Want) > 0 {
		body["want_version"] = r.Want
	}
	if r.PassNewer {
		body["pass_newer"] = true
	}
	var out struct {
		Messages []messageJSON `json:"messages"`
	}
	if err := c.do(ctx, c.path(group, topic, "receive"), body, &out); err != nil {
		return nil, err
	}
	msgs := make([]members.Message, len(out.Messages))
	for i, m := range out.Messages {
		ev, err := m.Event.Event()
		if err != nil {
			return nil, err
		}
		msgs[i] = members.Message{AckID: m.AckID, Delivery: m.Delivery, Event: ev}
	}
	return msgs, nil
}

type ackAnswer struct {
	Acked  int              `json:"acked"`
	Nacked int              `json:"nacked"`
	Failed []members.Failed `json:"failed"`
}

// Ack implements members.Source.
func (c *Client) Ack(ctx context.Context, group, topic string, ackIDs []string) (members.AckResult, error) {
	var out ackAnswer
	if err := c.do(ctx, c.path(group, topic, "ack"), map[string]any{"ack_ids": nonNil(ackIDs)}, &out); err != nil {
		return members.AckResult{}, err
	}
	return members.AckResult{Done: out.Acked, Failed: out.Failed}, nil
}

// Nack implements members.Source.
func (c *Client) Nack(ctx context.Context, group, topic string, ackIDs []string, retryAfter time.Duration) (members.AckResult, error) {
	var out ackAnswer
	body := map[string]any{"ack_ids": nonNil(ackIDs), "retry_after_ms": retryAfter.Milliseconds()}
	if err := c.do(ctx, c.path(group, topic, "nack"), body, &out); err != nil {
		return members.AckResult{}, err
	}
	return members.AckResult{Done: out.Nacked, Failed: out.Failed}, nil
}

// Reset implements members.Source.
func (c *Client) Reset(ctx context.Context, group, topic string, start subscribe.Start) (members.Position, error) {
	body := map[string]any{}
	if v, ok := start.Version(); ok {
		body["version"] = v
	} else if t, ok := start.Time(); ok {
		body["time"] = t.UTC().Format(time.RFC3339Nano)
	} else {
		body["latest"] = true
	}
	var out struct {
		Position members.Position `json:"position"`
	}
	if err := c.do(ctx, c.path(group, topic, "reset"), body, &out); err != nil {
		return members.Position{}, err
	}
	return out.Position, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
