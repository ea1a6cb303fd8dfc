package uctest

import (
	"encoding/json"
	"fmt"

	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

var validName = regexp.MustCompile(`^[a-zA-Z0-9_@-]+$`)

const base = "/api/2.1/unity-catalog"

type apiErr struct {
	status int
	code   string
	msg    string
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request, body []byte) {
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	if down {
		writeErr(w, apiErr{http.StatusServiceUnavailable, "UNAVAILABLE", "the test server is down"})
		return
	}
	if s.opts.Token != "" && r.Header.Get("Authorization") != "Bearer "+s.opts.Token {
		writeErr(w, apiErr{http.StatusUnauthorized, "UNAUTHENTICATED", "No authorization found."})
		return
	}
	path := strings.TrimPrefix(r.URL.Path, base)
	_, name, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/") // a catalog's name, a schema's or table's full name
	s.mu.Lock()
	defer s.mu.Unlock()
	var out any
	var e *apiErr
	switch {
	case r.Method == http.MethodPost && path == "/catalogs":
		out, e = s.createCatalog(body)
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/catalogs/"):
		out, e = s.get(s.catalogs, name, "CATALOG_NOT_FOUND", "Catalog")
	case r.Method == http.MethodPost && path == "/schemas":
		out, e = s.createSchema(body)
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/schemas/"):
		out, e = s.get(s.schemas, name, "SCHEMA_NOT_FOUND", "Schema")
	case r.Method == http.MethodPost && path == "/tables":
		out, e = s.createTable(body)
	case r.Method == http.MethodGet && path == "/tables":
		out, e = s.listTables(r)
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/tables/"):
		out, e = s.get(s.tables, name, "TABLE_NOT_FOUND", "Table")
	case r.Method == http.MethodDelete && strings.HasPrefix(path, "/tables/"):
		out, e = s.deleteTable(name)
	default:
		e = &apiErr{http.StatusNotImplemented, "UNIMPLEMENTED", r.Method + " " + path + " is not served by the test server"}
	}
	if e != nil {
		writeErr(w, *e)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func writeErr(w http.ResponseWriter, e apiErr) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error_code": e.code, "message": e.msg,
		"details": []any{map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": e.code}}})
}

func invalid(format string, args ...any) *apiErr {
	return &apiErr{http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf(format, args...)}
}

func (s *Server) exists(kind, name string) *apiErr {
	if s.opts.Legacy400 {
		return &apiErr{http.StatusBadRequest, strings.ToUpper(kind) + "_ALREADY_EXISTS", kind + " already exists: " + name}
	}
	return &apiErr{http.StatusConflict, "ALREADY_EXISTS", kind + " already exists: " + name}
}

func checkName(n string) *apiErr {
	if n == "" || len(n) > 255 || !validName.MatchString(n) {
		return invalid("Invalid name: %q", n)
	}
	return nil
}

func (s *Server) stamp(obj map[string]any) {
	s.seq++
	now := time.Now().UnixMilli()
	obj["owner"], obj["created_by"], obj["updated_by"] = "deltabus-test@example.com", "deltabus-test@example.com", "deltabus-test@example.com"
	obj["created_at"], obj["updated_at"] = now, now
}

func decode(body []byte) (map[string]any, *apiErr) {
	var in map[string]any
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, invalid("request body is not a JSON object: %v", err)
	}
	return in, nil
}

func str(m map[string]any, k string) string { v, _ := m[k].(string); return v }

func (s *Server) get(m map[string]map[string]any, name, code, kind string) (any, *apiErr) {
	if obj, ok := m[lower(name)]; ok {
		return obj, nil
	}
	return nil, &apiErr{http.StatusNotFound, code, kind + " not found: " + name}
}

func (s *Server) createCatalog(body []byte) (any, *apiErr) {
	in, e := decode(body)
	if e != nil {
		return nil, e
	}
	name := str(in, "name")
	if e := checkName(name); e != nil {
		return nil, e
	}
	if _, ok := s.catalogs[lower(name)]; ok {
		return nil, s.exists("Catalog", name)
	}
	obj := pick(in, "name", "comment", "properties")
	obj["id"] = fmt.Sprintf("00000000-0000-4000-8000-%012d", s.seq+1)
	s.stamp(obj)
	s.catalogs[lower(name)] = obj
	return obj, nil
}

func (s *Server) createSchema(body []byte) (any, *apiErr) {
	in, e := decode(body)
	if e != nil {
		return nil, e
	}
	name, cat := str(in, "name"), str(in, "catalog_name")
	if e := checkName(name); e != nil {
		return nil, e
	}
	if _, ok := s.catalogs[lower(cat)]; !ok {
		return nil, &apiErr{http.StatusNotFound, "CATALOG_NOT_FOUND", "Catalog not found: " + cat}
	}
	full := cat + "." + name
	if _, ok := s.schemas[lower(full)]; ok {
		return nil, s.exists("Schema", full)
	}
	obj := pick(in, "name", "catalog_name", "comment", "properties")
	obj["full_name"] = full
	obj["schema_id"] = fmt.Sprintf("00000000-0000-4000-8000-%012d", s.seq+1)
	s.stamp(obj)
	s.schemas[lower(full)] = obj
	return obj, nil
}

func (s *Server) createTable(body []byte) (any, *apiErr) {
	in, e := decode(body)
	if e != nil {
		return nil, e
	}
	name, cat, sch := str(in, "name"), str(in, "catalog_name"), str(in, "schema_name")
	if e := checkName(name); e != nil {
		return nil, e
	}
	cols, _ := in["columns"].([]any)
	for _, c := range cols {
		col, _ := c.(map[string]any)
		if e := validateTypeJSON(col); e != nil {
			return nil, e
		}
		if tt := str(col, "type_text"); tt != "" {
			col["type_text"] = strings.ToLower(tt)
		}
	}
	full := cat + "." + sch + "." + name
	if _, ok := s.schemas[lower(cat+"."+sch)]; !ok {
		return nil, &apiErr{http.StatusNotFound, "SCHEMA_NOT_FOUND", "Schema not found: " + cat + "." + sch}
	}
	if _, ok := s.tables[lower(full)]; ok {
		return nil, s.exists("Table", full)
	}
	if str(in, "table_type") != "EXTERNAL" {
		return nil, invalid("only EXTERNAL tables can be created here")
	}
	loc := str(in, "storage_location")
	if loc == "" || strings.Count(strings.TrimPrefix(strings.SplitN(loc, "://", 2)[len(strings.SplitN(loc, "://", 2))-1], "/"), "/") < 1 {
		return nil, invalid("External table storage location must include a non-empty path prefix: %s", loc)
	}
	obj := pick(in, "name", "catalog_name", "schema_name", "table_type", "data_source_format", "columns", "storage_location", "comment", "properties")
	obj["table_id"] = fmt.Sprintf("00000000-0000-4000-8000-%012d", s.seq+1)
	s.stamp(obj)
	s.tables[lower(full)] = obj
	return obj, nil
}

// validateTypeJSON is ColumnUtils.validateTypeJson: type_json must be a
// StructField with name, type, nullable and metadata, its name and
// nullable the column's.
func validateTypeJSON(col map[string]any) *apiErr {
	name := str(col, "name")
	tj := str(col, "type_json")
	if tj == "" {
		return invalid("Invalid type_json for column %s: Column %s has null/empty typeJson", name, name)
	}
	var f map[string]any
	if err := json.Unmarshal([]byte(tj), &f); err != nil {
		return invalid("Invalid type_json for column %s: Failed to parse typeJson for column %s: %s", name, name, tj)
	}
	for _, k := range []string{"type", "nullable", "metadata"} {
		if f[k] == nil {
			return invalid("Invalid type_json for column %s: type_json.%s is required.", name, k)
		}
	}
	if fn, _ := f["name"].(string); strings.TrimSpace(fn) == "" {
		return invalid("Invalid type_json for column %s: type_json.name is required.", name)
	} else if fn != name {
		return invalid("Invalid type_json for column %s: field name %s does not match column name %s", name, fn, name)
	}
	if _, ok := f["metadata"].(map[string]any); !ok {
		return invalid("Invalid type_json for column %s: type_json.metadata is not an object", name)
	}
	if n, ok := col["nullable"].(bool); ok && f["nullable"] != n {
		return invalid("Invalid type_json for column %s: field nullable %v does not match column nullable %v", name, f["nullable"], n)
	}
	return nil
}

func (s *Server) listTables(r *http.Request) (any, *apiErr) {
	q := r.URL.Query()
	cat, sch := q.Get("catalog_name"), q.Get("schema_name")
	if _, ok := s.schemas[lower(cat+"."+sch)]; !ok {
		return nil, &apiErr{http.StatusNotFound, "SCHEMA_NOT_FOUND", "Schema not found: " + cat + "." + sch}
	}
	page := 50
	if m, err := strconv.Atoi(q.Get("max_results")); err == nil && m > 0 && m < page {
		page = m
	}
	var names []string
	for k, t := range s.tables {
		if lower(str(t, "catalog_name")) == lower(cat) && lower(str(t, "schema_name")) == lower(sch) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	start := 0
	if tok := q.Get("page_token"); tok != "" {
		start = sort.SearchStrings(names, tok) + 1
	}
	end := min(start+page, len(names))
	tables := []any{}
	for _, n := range names[start:end] {
		tables = append(tables, s.tables[n])
	}
	out := map[string]any{"tables": tables}
	if end < len(names) {
		out["next_page_token"] = names[end-1]
	}
	return out, nil
}

func (s *Server) deleteTable(full string) (any, *apiErr) {
	if _, ok := s.tables[lower(full)]; !ok {
		return nil, &apiErr{http.StatusNotFound, "TABLE_NOT_FOUND", "Table not found: " + full}
	}
	delete(s.tables, lower(full))
	return map[string]any{}, nil
}

func pick(in map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		if v, ok := in[k]; ok {
			out[k] = v
		}
	}
	return out
}

func clone(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

func lower(s string) string { return strings.ToLower(s) }
