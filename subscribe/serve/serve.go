// Package serve is the HTTP API of consumer groups with parallel members
// (package subscribe/members), for members in any language: `relay
// serve`. A member receives events, handles them and acknowledges them;
// the server keeps each group's state in the store, so any number of
// servers may serve one group and any of them may be restarted.
//
//	GET  /healthz
//	POST /v1/groups/{group}/topics/{topic}/receive  {"member":"m1","max":100,"wait_ms":5000,"visibility_ms":30000,
//	                                                 "want_version":{"OrderPlaced":2},"pass_newer":false}
//	     -> {"messages":[{"ack_id":"…","delivery":1,"event":{…}}]}
//	POST /v1/groups/{group}/topics/{topic}/ack      {"ack_ids":["…"]}  -> {"acked":N,"failed":[{"ack_id","reason"}]}
//	POST /v1/groups/{group}/topics/{topic}/nack     {"ack_ids":["…"],"retry_after_ms":N}  -> {"nacked":N,"failed":[…]}
//	POST /v1/groups/{group}/topics/{topic}/reset    {"version":N} | {"time":"RFC 3339"} | {"latest":true}
//	     -> {"position":{"version":N,"offset":0}}
//	GET  /v1/groups/{group}/topics/{topic}          the group's state on this server (members.Status)
//	GET  /v1/groups                                 every group open on this server
//	GET  /metrics                                   Prometheus (members, in flight, redeliveries, waits, throughput)
//
// An event has the fields `relay consume` prints (subscribe.EventJSON).
// Errors are a status and {"error":"one line"}: 400 for a request that
// cannot be served as sent, 401 without a valid token, 403 for a group,
// topic or action the token is not granted, 404 for an unknown path or a
// topic without a table (reset), 409 when retention passed the group's
// position or its table was replaced (reset the group), 503 while the
// store fails (retry; nothing is lost). A request is never answered
// before its change is durable in the store.
//
// Authentication is a bearer token (Tokens: a file of one token per
// line, optionally limited to groups and topics, and allowed to see
// personal fields decrypted). A server without tokens listens on a
// loopback address only.
package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
	"github.com/deltabus/deltabus/subscribe/members"
)

// Config configure a Server.
type Config struct {
	Groups *members.Groups
	// Tokens, when set, are required on every /v1 request; nil serves
	// without authentication (a loopback address only: cmd/relay checks).
	Tokens *Tokens
	// Reveal: the groups can decrypt personal fields (they have the KEK).
	// Tokens granted reveal then get them decrypted; without Tokens every
	// caller does.
	Reveal bool
	// Store, when set, is the store root GET /v1/cuts reads consistent
	// cuts from (cuts.go).
	Store storage.Store
	// Metrics, when set, is served at /metrics.
	Metrics http.Handler
	Logger  *slog.Logger
}

// Server is the API's http.Handler.
type Server struct {
	cfg Config
	mux *http.ServeMux
	log *slog.Logger
}

// maxBody bounds a request body (10,000 ack ids fit).
const maxBody = 1 << 20

// New returns the server.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg, mux: http.NewServeMux(), log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	if cfg.Metrics != nil {
		s.mux.Handle("GET /metrics", cfg.Metrics)
	}
	const gt = "/v1/groups/{group}/topics/{topic}"
	s.mux.HandleFunc("POST "+gt+"/receive", s.authorized(s.receive))
	s.mux.HandleFunc("POST "+gt+"/ack", s.authorized(s.ack))
	s.mux.HandleFunc("POST "+gt+"/nack", s.authorized(s.nack))
	s.mux.HandleFunc("POST "+gt+"/reset", s.authorized(s.reset))
	s.mux.HandleFunc("GET "+gt, s.authorized(s.status))
	s.mux.HandleFunc("GET /v1/groups", s.authorized(s.list))
	s.mux.HandleFunc("GET /v1/cuts", s.authorized(s.cuts))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s %s (see docs/consumers.md for the API)", r.Method, r.URL.Path))
	})
	return s
}

// ServeHTTP implements http.Handler. A method the path does not take gets
// 405 from the mux; its body is made JSON like every other error.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(&jsonErrors{ResponseWriter: w}, r)
}

// caller is who sent a request, once authenticated.
type caller struct {
	grant *Grant // nil without tokens
}

func (c caller) reveal(s *Server) bool {
	if !s.cfg.Reveal {
		return false
	}
	return c.grant == nil || c.grant.Reveal
}

type handler func(w http.ResponseWriter, r *http.Request, c caller)

// authorized checks the bearer token and its grant for the path's group
// and topic.
func (s *Server) authorized(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var c caller
		if s.cfg.Tokens != nil {
			auth := r.Header.Get("Authorization")
			tok, ok := strings.CutPrefix(auth, "Bearer ")
			if !ok || tok == "" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="deltabus"`)
				writeError(w, http.StatusUnauthorized, "a bearer token is required: send Authorization: Bearer <token>")
				return
			}
			g, err := s.cfg.Tokens.Lookup(strings.TrimSpace(tok))
			if err != nil {
				s.log.Error("serve: the token file cannot be read again", "err", err)
			}
			if g == nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="deltabus", error="invalid_token"`)
				writeError(w, http.StatusUnauthorized, "the bearer token is not one this server accepts")
				return
			}
			group, topic := r.PathValue("group"), r.PathValue("topic")
			if group != "" && !g.Allows(group, topic) {
				writeError(w, http.StatusForbidden, fmt.Sprintf("token %q is not granted group %q in topic %q", g.Name, group, topic))
				return
			}
			c.grant = g
		}
		h(w, r, c)
	}
}

// receiveBody is a receive request.
type receiveBody struct {
	Member       string           `json:"member"`
	Max          *int             `json:"max"`
	WaitMS       *int64           `json:"wait_ms"`
	VisibilityMS *int64           `json:"visibility_ms"`
	WantVersion  map[string]int32 `json:"want_version"`
	PassNewer    bool             `json:"pass_newer"`
}

type messageJSON struct {
	AckID    string              `json:"ack_id"`
	Delivery int32               `json:"delivery"`
	Event    subscribe.EventJSON `json:"event"`
}

func (s *Server) receive(w http.ResponseWriter, r *http.Request, c caller) {
	var b receiveBody
	if !decode(w, r, &b) {
		return
	}
	req := members.ReceiveRequest{Member: b.Member, Want: b.WantVersion, PassNewer: b.PassNewer, Reveal: c.reveal(s)}
	if b.Max != nil {
		if *b.Max < 1 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("max is %d: give 1 to %d events", *b.Max, members.MaxMax))
			return
		}
		req.Max = *b.Max
	}
	if b.WaitMS != nil {
		req.Wait = durationMS(*b.WaitMS)
	}
	if b.VisibilityMS != nil {
		if *b.VisibilityMS <= 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("visibility_ms is %d: give %d to %d", *b.VisibilityMS,
				members.MinVisibility.Milliseconds(), members.MaxVisibility.Milliseconds()))
			return
		}
		req.Visibility = durationMS(*b.VisibilityMS)
	}
	msgs, err := s.cfg.Groups.Receive(r.Context(), r.PathValue("group"), r.PathValue("topic"), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := struct {
		Messages []messageJSON `json:"messages"`
	}{Messages: make([]messageJSON, len(msgs))}
	for i := range msgs {
		out.Messages[i] = messageJSON{AckID: msgs[i].AckID, Delivery: msgs[i].Delivery, Event: subscribe.NewEventJSON(&msgs[i].Event)}
	}
	writeJSON(w, http.StatusOK, out)
}

// durationMS turns milliseconds into a duration, saturating instead of
// overflowing (the members package refuses what is out of range).
func durationMS(v int64) time.Duration {
	const limit = int64(1<<63-1) / int64(time.Millisecond)
	if v > limit {
		v = limit
	}
	if v < -limit {
		v = -limit
	}
	return time.Duration(v) * time.Millisecond
}

type ackBody struct {
	AckIDs       []string `json:"ack_ids"`
	RetryAfterMS int64    `json:"retry_after_ms"`
}

func (s *Server) ack(w http.ResponseWriter, r *http.Request, _ caller) {
	var b ackBody
	if !decode(w, r, &b) {
		return
	}
	if b.RetryAfterMS != 0 {
		writeError(w, http.StatusBadRequest, "retry_after_ms belongs to nack, not ack")
		return
	}
	if b.AckIDs == nil {
		writeError(w, http.StatusBadRequest, `ack_ids is required: {"ack_ids":["…"]}`)
		return
	}
	res, err := s.cfg.Groups.Ack(r.Context(), r.PathValue("group"), r.PathValue("topic"), b.AckIDs)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"acked": res.Done, "failed": res.Failed})
}

func (s *Server) nack(w http.ResponseWriter, r *http.Request, _ caller) {
	var b ackBody
	if !decode(w, r, &b) {
		return
	}
	if b.AckIDs == nil {
		writeError(w, http.StatusBadRequest, `ack_ids is required: {"ack_ids":["…"],"retry_after_ms":1000}`)
		return
	}
	res, err := s.cfg.Groups.Nack(r.Context(), r.PathValue("group"), r.PathValue("topic"), b.AckIDs, durationMS(b.RetryAfterMS))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"nacked": res.Done, "failed": res.Failed})
}

type resetBody struct {
	Version *int64  `json:"version"`
	Time    *string `json:"time"`
	Latest  bool    `json:"latest"`
}

func (s *Server) reset(w http.ResponseWriter, r *http.Request, _ caller) {
	var b resetBody
	if !decode(w, r, &b) {
		return
	}
	var start subscribe.Start
	n := 0
	if b.Version != nil {
		n++
		if *b.Version < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("version is %d: give a version of the topic's table, 0 or more", *b.Version))
			return
		}
		start = subscribe.FromVersion(*b.Version)
	}
	if b.Time != nil {
		n++
		t, err := time.Parse(time.RFC3339Nano, *b.Time)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("time %q is not an RFC 3339 time (e.g. 2026-11-30T08:00:00Z)", truncate(*b.Time)))
			return
		}
		start = subscribe.FromTime(t)
	}
	if b.Latest {
		n++
		start = subscribe.FromLatest()
	}
	if n != 1 {
		writeError(w, http.StatusBadRequest, `give exactly one of {"version":N}, {"time":"2026-11-30T08:00:00Z"} or {"latest":true}`)
		return
	}
	pos, err := s.cfg.Groups.Reset(r.Context(), r.PathValue("group"), r.PathValue("topic"), start)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"position": pos})
}

func (s *Server) status(w http.ResponseWriter, r *http.Request, _ caller) {
	group, topic := r.PathValue("group"), r.PathValue("topic")
	for _, st := range s.cfg.Groups.Status() {
		if st.Group == group && st.Topic == topic {
			writeJSON(w, http.StatusOK, st)
			return
		}
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("group %q of topic %q is not open on this server (it opens at its first receive)", group, topic))
}

func (s *Server) list(w http.ResponseWriter, _ *http.Request, c caller) {
	out := []members.Status{}
	for _, st := range s.cfg.Groups.Status() {
		if c.grant == nil || c.grant.Allows(st.Group, st.Topic) {
			out = append(out, st)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"groups": out})
}

// fail answers an error: the request's fault (4xx) or the store's (503),
// never a 500.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var (
		re  *members.RequestError
		ret *subscribe.RetentionError
		nv  *subscribe.NewerVersionError
	)
	switch {
	case errors.As(err, &re):
		writeError(w, http.StatusBadRequest, re.Msg)
	case errors.As(err, &ret), errors.Is(err, subscribe.ErrTableReplaced):
		writeError(w, http.StatusConflict, err.Error())
	case errors.As(err, &nv):
		writeError(w, http.StatusConflict, err.Error())
	case errors.Is(err, members.ErrNoTable):
		writeError(w, http.StatusNotFound, err.Error())
	case r.Context().Err() != nil:
		// the client went away: nobody reads the answer
	default:
		s.log.Warn("serve: request failed", "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, err.Error())
	}
}

// decode reads a JSON body into v, refusing unknown fields, trailing
// data and bodies over maxBody with one clear line.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("data after the JSON object")
	}
	if err == nil {
		if _, e := dec.Token(); !errors.Is(e, io.EOF) {
			err = errors.New("data after the JSON object")
		}
	}
	if err == nil {
		return true
	}
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &mb):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is over %d bytes", maxBody))
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, "the request body is empty: send a JSON object")
	default:
		writeError(w, http.StatusBadRequest, "the request body is not the JSON object expected: "+oneLine(err.Error()))
	}
	return false
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": oneLine(msg)})
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// jsonErrors turns the mux's own plain-text errors (405 Method Not
// Allowed) into the API's JSON form.
type jsonErrors struct {
	http.ResponseWriter
	plain bool
}

func (j *jsonErrors) WriteHeader(code int) {
	if code == http.StatusMethodNotAllowed && j.Header().Get("Content-Type") != "application/json" {
		j.plain = true
		j.Header().Set("Content-Type", "application/json")
		j.Header().Del("X-Content-Type-Options")
		j.ResponseWriter.WriteHeader(code)
		_ = json.NewEncoder(j.ResponseWriter).Encode(map[string]string{"error": "this endpoint does not take that method (see docs/consumers.md for the API)"})
		return
	}
	j.ResponseWriter.WriteHeader(code)
}

func (j *jsonErrors) Write(b []byte) (int, error) {
	if j.plain {
		return len(b), nil
	}
	return j.ResponseWriter.Write(b)
}

// Flush lets long answers stream when the writer can.
func (j *jsonErrors) Flush() {
	if f, ok := j.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
