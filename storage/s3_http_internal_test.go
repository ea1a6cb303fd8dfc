package storage

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hashicorp/go-retryablehttp"
)

// TestReplayTransportRefusesLargeBufferedBody: a large body without
// GetBody is refused rather than read into memory.
func TestReplayTransportRefusesLargeBufferedBody(t *testing.T) {
	rt := replayTransport{rc: retryablehttp.NewClient()}
	n := int64(maxBufferedBody + 1)
	req, err := http.NewRequest(http.MethodPut, "http://127.0.0.1:1/b/k", io.NopCloser(bytes.NewReader(make([]byte, n))))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = n
	if _, err := rt.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "refusing to hold") {
		t.Fatalf("RoundTrip of a %d-byte body without GetBody: %v, want a refusal", n, err)
	}
}
