package storage_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/s3test"
)

func TestOpenFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store root")
	s, err := storage.Open(t.Context(), "file://"+dir, storage.S3Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, ok := s.(*storage.Local)
	if !ok || l.Root() != dir {
		t.Fatalf("Open(file://%s) = %T %v, want *Local rooted there", dir, s, s)
	}
	if err := s.PutIfAbsent(t.Context(), "t/_delta_log/00000000000000000000.json", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	escaped := "file://" + strings.ReplaceAll(dir, " ", "%20")
	if _, err := storage.Open(t.Context(), escaped, storage.S3Options{}); err != nil {
		t.Fatalf("Open(%s): %v", escaped, err)
	}
}

func TestOpenRejects(t *testing.T) {
	for _, u := range []string{
		"", "/abs/path", "http://host/x", "file://relative/x", "file:relative",
		"s3:///no-bucket", "s3://AKIA:secret@bucket/p", "s3://bucket/p?x=1", "s3://bucket/a/../b",
	} {
		s, err := storage.Open(t.Context(), u, storage.S3Options{})
		if err == nil {
			t.Errorf("Open(%q) = %v, want an error", u, s)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q) error leaks the secret: %v", u, err)
		}
	}
}

// TestOpenS3FromEnv: endpoint, path style and credentials come from the
// environment (DELTABUS_S3_*, the standard AWS chain).
func TestOpenS3FromEnv(t *testing.T) {
	b := s3test.NewBucket(t)
	empty := filepath.Join(t.TempDir(), "none")
	t.Setenv("DELTABUS_S3_ENDPOINT", b.Endpoint)
	t.Setenv("DELTABUS_S3_PATH_STYLE", "true")
	t.Setenv("AWS_ACCESS_KEY_ID", b.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", b.SecretKey)
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", empty)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", empty)
	s, err := storage.Open(t.Context(), "s3://"+b.Bucket+"/tables/", storage.S3Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.String(), "s3://"+b.Bucket+"/tables"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	if err := s.PutIfAbsent(t.Context(), "orders/_delta_log/00000000000000000000.json", []byte("v0")); err != nil {
		t.Fatal(err)
	}
	// Explicit options win over the environment.
	t.Setenv("DELTABUS_S3_ENDPOINT", "http://127.0.0.1:1")
	s2, err := storage.Open(t.Context(), b.URL("tables"), b.Options())
	if err != nil {
		t.Fatal(err)
	}
	got, err := storage.Sub(s2, "orders").Get(t.Context(), "_delta_log/00000000000000000000.json")
	if err != nil || string(got) != "v0" {
		t.Fatalf("Get through explicit options = %q, %v", got, err)
	}
}
