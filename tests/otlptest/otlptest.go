// Package otlptest is an OTLP/HTTP receiver for tests: a real HTTP server
// on 127.0.0.1 that decodes what exporters send to /v1/traces and
// /v1/metrics (protobuf, optionally gzip) and keeps it for the test to
// read. Point a process at it with OTEL_EXPORTER_OTLP_ENDPOINT=URL.
package otlptest

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is a received span with the resource it came from.
type Span struct {
	*tracepb.Span
	Resource *resourcepb.Resource
}

// Receiver keeps every span and metric it received.
type Receiver struct {
	URL string // base URL, for OTEL_EXPORTER_OTLP_ENDPOINT

	mu      sync.Mutex
	spans   []Span
	metrics []*metricpb.Metric
}

// Start serves a receiver until the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, req *http.Request) {
		var msg coltracepb.ExportTraceServiceRequest
		if !decode(w, req, &msg) {
			return
		}
		r.mu.Lock()
		for _, rs := range msg.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					r.spans = append(r.spans, Span{Span: s, Resource: rs.GetResource()})
				}
			}
		}
		r.mu.Unlock()
		reply(w, &coltracepb.ExportTraceServiceResponse{})
	})
	mux.HandleFunc("POST /v1/metrics", func(w http.ResponseWriter, req *http.Request) {
		var msg colmetricpb.ExportMetricsServiceRequest
		if !decode(w, req, &msg) {
			return
		}
		r.mu.Lock()
		for _, rm := range msg.GetResourceMetrics() {
			for _, sm := range rm.GetScopeMetrics() {
				r.metrics = append(r.metrics, sm.GetMetrics()...)
			}
		}
		r.mu.Unlock()
		reply(w, &colmetricpb.ExportMetricsServiceResponse{})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func decode(w http.ResponseWriter, req *http.Request, msg proto.Message) bool {
	var body io.Reader = http.MaxBytesReader(w, req.Body, 64<<20)
	if req.Header.Get("Content-Encoding") == "gzip" {
		z, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return false
		}
		body = z
	}
	b, err := io.ReadAll(body)
	if err == nil {
		err = proto.Unmarshal(b, msg)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func reply(w http.ResponseWriter, msg proto.Message) {
	b, _ := proto.Marshal(msg)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// MetricNames returns the names of the metrics received so far.
func (r *Receiver) MetricNames() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := map[string]bool{}
	for _, m := range r.metrics {
		names[m.GetName()] = true
	}
	return names
}

// Attr returns the string form of attribute key in attrs ("" if absent).
func Attr(attrs []*commonpb.KeyValue, key string) string {
	for _, kv := range attrs {
		if kv.GetKey() == key {
			switch v := kv.GetValue().GetValue().(type) {
			case *commonpb.AnyValue_StringValue:
				return v.StringValue
			case *commonpb.AnyValue_IntValue:
				return strconv.FormatInt(v.IntValue, 10)
			case *commonpb.AnyValue_BoolValue:
				return strconv.FormatBool(v.BoolValue)
			default:
				return kv.GetValue().String()
			}
		}
	}
	return ""
}
