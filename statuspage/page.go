package statuspage

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"sync"
	"time"
)

//go:embed page.html
var pageHTML string

//go:embed status.js
var statusJS []byte

// page is parsed when the page is first served, not at every start of
// every command (html/template's parse costs about a millisecond).
var page = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("page").Funcs(template.FuncMap{
		"bytes":   fmtBytes,
		"secs":    fmtSecs,
		"ago":     fmtAgo,
		"since":   func(t time.Time) string { return fmtSecs(time.Since(t).Seconds()) + " ago" },
		"pct":     func(p *float64) string { return fmtPct(p) },
		"ms":      func(d time.Duration) int64 { return d.Milliseconds() },
		"utc":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
		"derefOr": func(p *int64, s string) string { return derefOr(p, s) },
	}).Parse(pageHTML))
})

type pageData struct {
	*Status
	Refresh time.Duration
}

// Handler serves the page at "/" (and its main section alone at
// "/?part=main", which the page's script fetches to refresh itself) and
// the Status as JSON at "/api/status".
func (c *Collector) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(c.Status(r.Context()))
	})
	mux.HandleFunc("GET /status.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(statusJS)
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		name := "page"
		if r.URL.Query().Get("part") == "main" {
			name = "main"
		}
		var buf bytes.Buffer
		if err := page().ExecuteTemplate(&buf, name, pageData{c.Status(r.Context()), c.cfg.Refresh}); err != nil {
			http.Error(w, "render the status page: "+err.Error(), http.StatusInternalServerError)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		// Everything is served from here: no script, style or image from
		// anywhere else, no framing.
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		_, _ = w.Write(buf.Bytes())
	})
	return mux
}

func fmtBytes(n int64) string {
	switch {
	case n < 0:
		return "-" + fmtBytes(-n)
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
}

func fmtSecs(s float64) string {
	if s < 0 {
		return "-" + fmtSecs(-s)
	}
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", s)
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

func fmtAgo(p *float64) string {
	if p == nil {
		return "never"
	}
	return fmtSecs(*p) + " ago"
}

func fmtPct(p *float64) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprintf("%.2f%%", *p*100)
}

func derefOr(p *int64, s string) string {
	if p == nil {
		return s
	}
	return fmtBytes(*p)
}
