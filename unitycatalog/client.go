// Package unitycatalog registers DeltaBus topics in Unity Catalog as
// EXTERNAL DELTA tables, through the REST API of Unity Catalog OSS
// (api/2.1/unity-catalog; Databricks' Unity Catalog serves the same
// calls).
//
// What a registration holds: the table's storage_location (the topic
// table's URL), every column with type_name, type_text, type_json (the
// column's StructField JSON exactly as the Delta log has it, metadata and
// comment included), position, nullable and comment; the table's comment
// (the topic's description) and properties (deltabus.owner,
// deltabus.contracts, deltabus.personal_columns, deltabus.sources,
// deltabus.version, deltabus.topic).
//
// Sync is idempotent: it reads before it writes, creates the catalog and
// schema only when missing, and leaves a table that already matches
// untouched (deltabus.version, the release that registered it, is not
// compared). The API has no call that updates a table, so a table whose
// description, columns or properties changed is brought up to date by
// deleting and creating it again (an EXTERNAL table's delete removes only
// its catalog entry, never data): in Databricks that also drops grants
// made on the table itself, so grant on the schema. Sync never touches a
// table of the same name at another storage location: that is someone
// else's table, reported as a conflict.
//
// A topic group's table (catalog.Group: many topics in one Delta table)
// is registered once, as one EXTERNAL DELTA table named after its folder
// (_group_<group>), never per topic: its comment is the group's
// description (its topics; a reader of one filters WHERE topic = '...')
// and its properties are deltabus.group, deltabus.topics,
// deltabus.topic_count, deltabus.topic_patterns, the owners, contracts
// and personal columns of its topics (by topic), deltabus.sources and
// deltabus.version. Why not a view per topic: group.go. A topic joining
// the group changes the registration's comment and properties: Sync
// brings it up to date like any other change; a relay's Register does
// not.
//
// Unity Catalog table names are [a-zA-Z0-9_@-]+: a topic's "." becomes "_"
// (TableName); two topics that map to one name are a conflict.
//
// The bearer token is sent in the Authorization header only: it is never
// part of an error, a log line or a status.
package unitycatalog

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
)

// BasePath is the path of the Unity Catalog REST API under its server.
const BasePath = "/api/2.1/unity-catalog"

// maxBody bounds what the client reads from one response.
const maxBody = 16 << 20

// Client calls one Unity Catalog server.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// NewClient returns a client for the server at rawURL (http(s)://host[:port],
// with or without BasePath). token may be empty (a server without
// authorization).
func NewClient(rawURL, token string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("Unity Catalog URL %q is invalid: want http(s)://host[:port], e.g. https://uc.example.com", Redact(rawURL))
	}
	if u.User != nil {
		return nil, fmt.Errorf("Unity Catalog URL %s holds credentials: put the token in DELTABUS_UNITY_CATALOG_TOKEN instead", Redact(rawURL))
	}
	u.RawQuery, u.Fragment = "", ""
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), BasePath) + BasePath
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{base: u, token: token, http: hc}, nil
}

// String is the server's base URL (no credentials).
func (c *Client) String() string { return c.base.String() }

// Redact returns a URL without its user information and query, for
// messages.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// APIError is a Unity Catalog error response (or a status without one).
type APIError struct {
	Method, Path string
	Status       int
	Code         string // error_code, e.g. TABLE_ALREADY_EXISTS
	Message      string
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("Unity Catalog %s %s: %d", e.Method, e.Path, e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// IsNotFound reports a 404 (a missing catalog, schema or table).
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// IsAlreadyExists reports a create of a name that exists: 409 (Unity
// Catalog OSS releases, Databricks) or 400 with an *ALREADY_EXISTS code
// (Unity Catalog OSS since March 2026 answers CATALOG_ALREADY_EXISTS,
// SCHEMA_ALREADY_EXISTS and TABLE_ALREADY_EXISTS with 400).
func IsAlreadyExists(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return false
	}
	return ae.Status == http.StatusConflict || (ae.Status == http.StatusBadRequest && strings.HasSuffix(ae.Code, "ALREADY_EXISTS"))
}

// Retryable reports whether a call may succeed if repeated: a transport
// error, 429 or 5xx.
func Retryable(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return true
	}
	return ae.Status == http.StatusTooManyRequests || ae.Status >= 500
}

// do sends a JSON request and decodes a 200 answer into out (nil: discard).
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	u := *c.base
	u.Path = c.base.Path + path
	u.RawPath = c.base.Path + escapePath(path)
	u.RawQuery = query.Encode()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("Unity Catalog %s %s: %w", method, path, scrub(err, c.token))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("Unity Catalog %s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		ae := &APIError{Method: method, Path: path, Status: resp.StatusCode}
		var eb struct {
			Code    string `json:"error_code"`
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &eb) == nil {
			ae.Code, ae.Message = eb.Code, oneLine(strings.ReplaceAll(eb.Message, c.token, "***"), 300)
		}
		return ae
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("Unity Catalog %s %s: answer is not the JSON the API describes: %w", method, path, err)
	}
	return nil
}

func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// scrub replaces the token in a transport error's text (it is only ever
// in a header, but an error of a proxy or a hostile server could echo it).
func scrub(err error, token string) error {
	if token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), token, "***"))
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
