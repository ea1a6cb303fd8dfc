package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// contextMatcher returns the matcher Docker builds from .dockerignore.
func contextMatcher(t *testing.T) *patternmatcher.PatternMatcher {
	t.Helper()
	f, err := os.Open("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatalf(".dockerignore: %v", err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatalf(".dockerignore: %v", err)
	}
	return pm
}

func excluded(t *testing.T, pm *patternmatcher.PatternMatcher, rel string) bool {
	t.Helper()
	ex, err := pm.MatchesOrParentMatches(filepath.ToSlash(rel))
	if err != nil {
		t.Fatalf("match %s: %v", rel, err)
	}
	return ex
}

// goListPackage is what this test reads of `go list -json`.
type goListPackage struct {
	Dir, ImportPath string
	Standard        bool
	Module          *struct{ Main bool }
	GoFiles         []string
	EmbedFiles      []string
}

// TestDockerignoreKeepsTheBuildInputs: every file `go build ./cmd/relay`
// reads from this repository is in the build context, and what the image
// must not carry (local data, binaries, git, deployment secrets, tests) is
// not.
func TestDockerignoreKeepsTheBuildInputs(t *testing.T) {
	pm := contextMatcher(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", "-json", "./cmd/relay")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./cmd/relay: %v\n%s", err, stderr.String())
	}
	needed := []string{"go.mod", "go.sum"}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goListPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if p.Standard || p.Module == nil || !p.Module.Main {
			continue
		}
		for _, f := range append(p.GoFiles, p.EmbedFiles...) {
			rel, err := filepath.Rel(root, filepath.Join(p.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			needed = append(needed, rel)
		}
	}
	if len(needed) < 20 {
		t.Fatalf("go list found only %v", needed)
	}
	for _, rel := range needed {
		if excluded(t, pm, rel) {
			t.Errorf(".dockerignore excludes %s, which go build ./cmd/relay reads", rel)
		}
	}
	for _, rel := range []string{".git", "bin/relay", "deltabus-data/orders/_delta_log/00000000000000000000.json",
		"deploy/compose/secrets/relay_pgpass", "deploy/go.mod", "sink/delta/testdata/x.parquet", "relay/relay_test.go",
		"tests/e2e/crash_test.go", "cmd/relay/relay.test", "cpu.prof"} {
		if !excluded(t, pm, rel) {
			t.Errorf(".dockerignore lets %s into the build context", rel)
		}
	}
}

// TestDockerfile: the image runs the static binary as the nonroot user,
// at the path the compose health check calls, and has the directory a
// local-store volume is mounted on, owned by that user.
func TestDockerfile(t *testing.T) {
	df := readFile(t, "../Dockerfile")
	stages := regexp.MustCompile(`(?m)^FROM `).Split(df, -1)
	final := stages[len(stages)-1]
	for _, want := range []string{
		"gcr.io/distroless/static",
		"USER 65532:65532",
		`ENTRYPOINT ["/relay"]`,
		"COPY --from=build --chown=65532:65532 /empty /var/lib/deltabus",
		"EXPOSE 9464",
	} {
		if !strings.Contains(final, want) {
			t.Errorf("Dockerfile final stage lacks %q", want)
		}
	}
	if !strings.Contains(df, "CGO_ENABLED=0 go build") || strings.Contains(df, "\nADD ") {
		t.Error("Dockerfile: want a static (CGO_ENABLED=0) build and no ADD")
	}
}
