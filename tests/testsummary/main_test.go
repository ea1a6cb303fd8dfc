package main

import (
	"io"
	"slices"
	"strings"
	"testing"
)

// TestExpectAndLabel: -expect names the tests that did not pass or fail
// (skipped, or never matched), and -label tags every package name.
func TestExpectAndLabel(t *testing.T) {
	s := &summary{out: map[key][]string{}, label: "PostgreSQL 14"}
	for _, l := range []string{
		`{"Action":"pass","Package":"p","Test":"TestA"}`,
		`{"Action":"fail","Package":"p","Test":"TestB"}`,
		`{"Action":"skip","Package":"p","Test":"TestC"}`,
		`{"Action":"pass","Package":"p","Test":"TestD/sub"}`,
	} {
		s.line([]byte(l), io.Discard)
	}
	if got, want := s.missing("TestA, TestB,TestC,TestD,TestE,"), []string{"TestC", "TestD", "TestE"}; !slices.Equal(got, want) {
		t.Errorf("missing = %v, want %v", got, want)
	}
	var b strings.Builder
	s.print(&b)
	if !strings.Contains(b.String(), "== FAIL p [PostgreSQL 14] TestB") {
		t.Errorf("summary does not tag the package:\n%s", b.String())
	}
}
