// Command testsummary reads `go test -json` on stdin and writes a readable
// account: one line per package as it finishes, then, for every failing
// test, the lines that test printed (not the last lines of the whole run),
// the skipped tests with their reason, and the counts. It exits 1 when a
// test or a package failed, when the stream holds a build error, or when a
// test named by -expect did not pass or fail (a run filtered by -run must
// not pass by running nothing once a test is renamed).
//
//	go test -json ./... | go run ./tests/testsummary [-log full.log] [-label L] [-expect TestA,TestB]
//
// -label tags every package name (say "PostgreSQL 14", for a run of the
// same packages on another server).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

type key struct{ pkg, test string }

type summary struct {
	out                     map[key][]string
	failed, skipped, passed []key
	badPkgs                 []string
	other                   []string // lines that are not JSON (build errors)
	label                   string   // tags every package name (-label)
}

func main() {
	logPath := flag.String("log", "", "also write every output line here")
	label := flag.String("label", "", "tag every package name with this, as \"pkg [label]\"")
	expect := flag.String("expect", "", "comma-separated top-level test names that must have run (passed or failed)")
	flag.Parse()
	var logf io.Writer = io.Discard
	if *logPath != "" {
		f, err := os.Create(*logPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
		defer f.Close()
		logf = f
	}
	s := &summary{out: map[key][]string{}, label: *label}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		s.line(sc.Bytes(), logf)
	}
	s.print(os.Stdout)
	missing := s.missing(*expect)
	for _, name := range missing {
		fmt.Printf("FAIL %s did not run (expected by -expect: renamed, or no longer matched by -run?)\n", name)
	}
	if len(s.failed) > 0 || len(s.badPkgs) > 0 || len(s.other) > 0 || len(missing) > 0 {
		os.Exit(1)
	}
}

// missing returns the names in the comma-separated list that no package
// ran as a top-level test that passed or failed.
func (s *summary) missing(list string) []string {
	ran := map[string]bool{}
	for _, k := range append(append([]key{}, s.passed...), s.failed...) {
		ran[k.test] = true
	}
	var names []string
	for _, name := range strings.Split(list, ",") {
		if name = strings.TrimSpace(name); name != "" && !ran[name] {
			names = append(names, name)
		}
	}
	return names
}

func (s *summary) line(b []byte, logf io.Writer) {
	var e event
	if err := json.Unmarshal(b, &e); err != nil || e.Action == "" {
		s.other = append(s.other, string(b))
		fmt.Fprintln(logf, string(b))
		return
	}
	if s.label != "" && e.Package != "" {
		e.Package += " [" + s.label + "]"
	}
	k := key{e.Package, e.Test}
	switch e.Action {
	case "output":
		fmt.Fprint(logf, e.Output)
		s.out[k] = append(s.out[k], strings.TrimRight(e.Output, "\n"))
	case "pass":
		if e.Test != "" {
			s.passed = append(s.passed, k)
		} else {
			fmt.Printf("ok   %s (%.1fs)\n", e.Package, e.Elapsed)
		}
	case "skip":
		if e.Test != "" {
			s.skipped = append(s.skipped, k)
		}
	case "fail":
		if e.Test != "" {
			s.failed = append(s.failed, k)
		} else {
			s.badPkgs = append(s.badPkgs, e.Package)
			fmt.Printf("FAIL %s (%.1fs)\n", e.Package, e.Elapsed)
		}
	}
}

func (s *summary) print(w io.Writer) {
	if len(s.other) > 0 {
		fmt.Fprintln(w, "\n== build output")
		for _, l := range s.other {
			fmt.Fprintln(w, l)
		}
	}
	for _, k := range s.failed {
		if isParentOf(k, s.failed) {
			continue // its failing subtests are printed
		}
		fmt.Fprintf(w, "\n== FAIL %s %s\n", k.pkg, k.test)
		for _, l := range s.out[k] {
			fmt.Fprintln(w, l)
		}
	}
	for _, p := range s.badPkgs {
		if lines := s.out[key{p, ""}]; len(lines) > 0 && !hasFailedTest(p, s.failed) {
			fmt.Fprintf(w, "\n== FAIL %s (outside any test)\n", p)
			for _, l := range tail(lines, 40) {
				fmt.Fprintln(w, l)
			}
		}
	}
	if len(s.skipped) > 0 {
		fmt.Fprintln(w, "\n== skipped")
		for _, k := range s.skipped {
			fmt.Fprintf(w, "%s %s: %s\n", k.pkg, k.test, skipReason(s.out[k]))
		}
	}
	sort.Strings(s.badPkgs)
	fmt.Fprintf(w, "\n%d passed, %d failed, %d skipped", len(s.passed), len(s.failed), len(s.skipped))
	if len(s.badPkgs) > 0 {
		fmt.Fprintf(w, "; failing packages: %s", strings.Join(s.badPkgs, " "))
	}
	fmt.Fprintln(w)
}

func isParentOf(k key, failed []key) bool {
	for _, f := range failed {
		if f.pkg == k.pkg && strings.HasPrefix(f.test, k.test+"/") {
			return true
		}
	}
	return false
}

func hasFailedTest(pkg string, failed []key) bool {
	for _, f := range failed {
		if f.pkg == pkg {
			return true
		}
	}
	return false
}

func skipReason(lines []string) string {
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "=== ") && !strings.HasPrefix(l, "--- SKIP") {
			return l
		}
	}
	return "(no reason printed)"
}

func tail(lines []string, n int) []string {
	if len(lines) > n {
		return lines[len(lines)-n:]
	}
	return lines
}
