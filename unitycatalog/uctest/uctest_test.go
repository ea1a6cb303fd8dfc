package uctest

import (
	"net/http"
	"strings"
	"testing"
)

// TestValidatorCatches: requests that break the description are reported:
// a wrong type, a missing required field, an undescribed property, an
// unknown operation.
func TestValidatorCatches(t *testing.T) {
	s := Start(t, Options{})
	post := func(path, body string) {
		resp, err := http.Post(s.URL+base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	post("/catalogs", `{"name":"lake"}`)
	post("/schemas", `{"name":"events","catalog_name":"lake"}`)
	if v := s.TakeViolations(); len(v) != 0 {
		t.Fatalf("valid requests reported: %v", v)
	}
	post("/tables", `{"name":"t","catalog_name":"lake","schema_name":"events","table_type":"EXTERNAL","columns":[{"name":"a","position":"first"}]}`)
	post("/tables", `{"catalog_name":"lake","schema_name":"events","table_type":"EXTERNAL","columns":[]}`)
	post("/tables", `{"name":"t","catalog_name":"lake","schema_name":"events","table_type":"EXTERNAL","columns":[],"storage_locaton":"s3://b/t"}`)
	post("/tables", `{"name":"t","catalog_name":"lake","schema_name":"events","table_type":"TEMPORARY","columns":[]}`)
	post("/no-such-thing", `{}`)
	v := strings.Join(s.TakeViolations(), "\n")
	for _, want := range []string{`"/columns/0/position": value must be an integer`, `property "name" is missing`, "/storage_locaton is not in the description", `"/table_type": value is not one of the allowed values`, "no such operation"} {
		if !strings.Contains(v, want) {
			t.Errorf("violations lack %s:\n%s", want, v)
		}
	}
}
