package storage

import (
	"strings"
	"testing"
)

func TestCheckURL(t *testing.T) {
	for raw, valid := range map[string]bool{
		"file:///var/lib/deltabus": true, "s3://bucket": true, "s3://bucket/a/b": true,
		"": false, "file://relative": false, "s3:///nobucket": false, "gs://b": false,
		"s3://AKIA:s3cret@bucket/p": false,
	} {
		err := CheckURL(raw)
		if (err == nil) != valid {
			t.Errorf("CheckURL(%q) = %v, want valid=%v", raw, err, valid)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("CheckURL(%q) echoes the secret: %v", raw, err)
		}
	}
}

func TestIsS3(t *testing.T) {
	for raw, want := range map[string]bool{
		"s3://bucket/prefix": true, "S3://bucket": true, "file:///var/lib/deltabus": false,
		"s3": false, "": false, "://": false, "/s3://x": false,
	} {
		if got := IsS3(raw); got != want {
			t.Errorf("IsS3(%q) = %v, want %v", raw, got, want)
		}
	}
}
