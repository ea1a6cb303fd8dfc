package repocheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// maxReadmeLines keeps the README a page for users: figures and long
// explanations belong in docs/.
const maxReadmeLines = 200

// TestReadmeIsAPage: the README stays under maxReadmeLines.
func TestReadmeIsAPage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, more than %d: move details into docs/ (operations.md, consumers.md, benchmarks.md)", n, maxReadmeLines)
	}
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsLinksResolve: every relative link (and image) in the README,
// docs/ and deploy/README.md names a file that exists, and every
// #anchor into a Markdown file names one of its headings.
func TestDocsLinksResolve(t *testing.T) {
	root := repoRoot(t)
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files := append([]string{filepath.Join(root, "README.md"), filepath.Join(root, "deploy", "README.md")}, docs...)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(link, "#")
			target := f
			if path != "" {
				target = filepath.Join(filepath.Dir(f), path)
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s links to %s, which does not exist", rel, link)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(target, ".md") && !hasAnchor(t, target, anchor) {
				t.Errorf("%s links to %s: no heading with that anchor", rel, link)
			}
		}
	}
}

// hasAnchor reports whether a heading of the Markdown file renders as
// #anchor (GitHub's rule: lowercase, punctuation dropped, spaces to '-').
func hasAnchor(t *testing.T, file, anchor string) bool {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		if slug(strings.TrimLeft(line, "# ")) == anchor {
			return true
		}
	}
	return false
}

func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Checking a database and a store: `relay doctor`": "checking-a-database-and-a-store-relay-doctor",
		"Maintenance: tables that stay fast for months":   "maintenance-tables-that-stay-fast-for-months",
		"Health, readiness, metrics":                      "health-readiness-metrics",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}
