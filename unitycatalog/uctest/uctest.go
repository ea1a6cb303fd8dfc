// Package uctest runs, on 127.0.0.1, an in-memory server that answers the
// Unity Catalog calls DeltaBus makes (catalogs, schemas, tables) the way
// Unity Catalog OSS does, and checks every request and every response
// against the API description Unity Catalog OSS publishes
// (testdata/all.yaml, vendored unchanged with its licence) with a real
// OpenAPI validator, kin-openapi's openapi3filter. Request bodies are
// also held to the described properties exactly (the description leaves
// additionalProperties open, which would let a misspelt field through).
//
// No Unity Catalog server can run here (it is a JVM build), so this is what
// the client is tested against. The behaviours copied, from the server's
// source at the vendored commit:
//   - names are [a-zA-Z0-9_@-]{1,255} (ValidationUtils.validateSqlObjectName);
//   - a column's type_json must be a Spark StructField JSON with name,
//     type, nullable and metadata, its name and nullable those of the
//     column (ColumnUtils.validateTypeJson), else 400 INVALID_ARGUMENT;
//   - type_text is stored lowercased; owner, ids and times are the
//     server's;
//   - creating an existing name: 409 ALREADY_EXISTS (Options.Legacy400:
//     400 CATALOG_/SCHEMA_/TABLE_ALREADY_EXISTS, as the server answers
//     since March 2026); a missing parent: 404 CATALOG_NOT_FOUND or
//     SCHEMA_NOT_FOUND; a missing object: 404 *_NOT_FOUND;
//   - error bodies {"error_code", "message", "details"};
//   - with a token configured, a call without "Authorization: Bearer
//     <token>" gets 401 UNAUTHENTICATED.
package uctest

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

//go:embed testdata/all.yaml
var spec []byte

// Options configure a Server.
type Options struct {
	Token     string // required bearer token; "" = no authorization
	Legacy400 bool   // answer an existing name with 400 *_ALREADY_EXISTS instead of 409
}

// Call is one request the server answered.
type Call struct {
	Method, Path string
	Status       int
}

// Server is a running test server.
type Server struct {
	URL  string // base URL of the server (without the API's base path)
	opts Options
	t    testing.TB
	srv  *httptest.Server
	rt   routers.Router

	mu         sync.Mutex
	down       bool
	calls      []Call
	violations []string
	catalogs   map[string]map[string]any
	schemas    map[string]map[string]any
	tables     map[string]map[string]any // by full name, lowercased
	seq        int
}

// Start starts a server; it stops when the test ends, and the test fails
// if any request or response broke the API description.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s := &Server{t: t, opts: opts, catalogs: map[string]map[string]any{}, schemas: map[string]map[string]any{}, tables: map[string]map[string]any{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Listener.Close()
	s.srv.Listener = ln
	s.srv.Start()
	s.URL = s.srv.URL
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(spec)
	if err != nil {
		t.Fatalf("load the Unity Catalog API description: %v", err)
	}
	doc.Servers = openapi3.Servers{{URL: s.URL + "/api/2.1/unity-catalog"}}
	// The description's flaws: ColumnInfo.nullable has the default
	// 'true' (a string for a boolean), and a model-credential example is
	// not of its schema. Only defaults and examples go unchecked; every
	// request and response is still validated in full.
	if s.rt, err = legacy.NewRouter(doc, openapi3.DisableSchemaDefaultsValidation(), openapi3.DisableExamplesValidation()); err != nil {
		t.Fatalf("route the Unity Catalog API description: %v", err)
	}
	t.Cleanup(func() {
		s.srv.Close()
		for _, v := range s.Violations() {
			t.Errorf("Unity Catalog API description broken: %s", v)
		}
	})
	return s
}

// SetDown makes every call fail with 503 (an outage) until SetDown(false).
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// Calls returns the requests answered so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Violations returns what broke the API description so far.
func (s *Server) Violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.violations...)
}

// TakeViolations returns what broke the API description so far and
// forgets it (for tests that break it on purpose).
func (s *Server) TakeViolations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.violations
	s.violations = nil
	return v
}

// Table returns a registered table as the server stores it.
func (s *Server) Table(fullName string) (map[string]any, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tables[lower(fullName)]
	return clone(t), ok
}

// Tables returns the full names of every registered table.
func (s *Server) Tables() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, t := range s.tables {
		out = append(out, fmt.Sprintf("%s.%s.%s", t["catalog_name"], t["schema_name"], t["name"]))
	}
	return out
}

func (s *Server) violation(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.violations = append(s.violations, fmt.Sprintf(format, args...))
}

// serve validates the request, answers it, and validates the answer.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	r.Body = io.NopCloser(bytes.NewReader(body))
	ctx := context.Background()
	full := r.Clone(ctx) // the router matches the description's server URL
	full.URL.Scheme, full.URL.Host = "http", r.Host
	route, params, err := s.rt.FindRoute(full)
	var input *openapi3filter.RequestValidationInput
	if err != nil {
		s.violation("%s %s: no such operation in the description: %v", r.Method, r.URL.Path, err)
	} else {
		input = &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true, SkipSettingDefaults: true}}
		if err := openapi3filter.ValidateRequest(ctx, input); err != nil {
			s.violation("request %s %s: %v", r.Method, r.URL.Path, err)
		}
		if len(body) > 0 && route.Operation.RequestBody != nil {
			if mt := route.Operation.RequestBody.Value.Content.Get("application/json"); mt != nil {
				var v any
				if json.Unmarshal(body, &v) == nil {
					for _, p := range undescribed(mt.Schema, v, "") {
						s.violation("request %s %s: property %s is not in the description", r.Method, r.URL.Path, p)
					}
				}
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	rec := httptest.NewRecorder()
	s.answer(rec, r, body)
	if input != nil {
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: input, Status: rec.Code, Header: rec.Header(),
			Options: &openapi3filter.Options{MultiError: true, IncludeResponseStatus: false}}
		out.SetBodyBytes(rec.Body.Bytes())
		if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
			s.violation("response to %s %s (%d): %v", r.Method, r.URL.Path, rec.Code, err)
		}
	}
	s.mu.Lock()
	s.calls = append(s.calls, Call{Method: r.Method, Path: r.URL.Path, Status: rec.Code})
	s.mu.Unlock()
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// undescribed lists the properties of v, at any depth, that its schema
// does not describe.
func undescribed(ref *openapi3.SchemaRef, v any, at string) []string {
	if ref == nil || ref.Value == nil {
		return nil
	}
	sc := ref.Value
	var out []string
	switch t := v.(type) {
	case map[string]any:
		if len(sc.Properties) == 0 {
			return nil // a map (additionalProperties), e.g. properties
		}
		for k, sub := range t {
			p, ok := sc.Properties[k]
			if !ok {
				out = append(out, at+"/"+k)
				continue
			}
			out = append(out, undescribed(p, sub, at+"/"+k)...)
		}
	case []any:
		for i, sub := range t {
			out = append(out, undescribed(sc.Items, sub, fmt.Sprintf("%s/%d", at, i))...)
		}
	}
	return out
}
