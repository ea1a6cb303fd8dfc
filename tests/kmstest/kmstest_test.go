package kmstest

import (
	"os"
	"strings"
	"testing"
)

// TestModuleMatchesDeps: scripts/deps.sh installs the version this harness names.
func TestModuleMatchesDeps(t *testing.T) {
	b, err := os.ReadFile("../../scripts/deps.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "LOCALKMS_MODULE="+Module+"\n") {
		t.Fatalf("scripts/deps.sh does not install %s", Module)
	}
}
