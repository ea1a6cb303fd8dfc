package outbox

import "testing"

// TestJSONTextBytesAreRaw: []byte payloads are JSON text, not base64.
func TestJSONTextBytesAreRaw(t *testing.T) {
	got, err := jsonText([]byte(`{"a":1}`))
	if err != nil || got != `{"a":1}` {
		t.Fatalf("jsonText([]byte) = %q, %v; want the JSON text itself", got, err)
	}
	if _, err := jsonText([]byte("not json")); err == nil {
		t.Fatal("invalid JSON bytes accepted")
	}
}
