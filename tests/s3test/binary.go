package s3test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// VersitygwModule is the versitygw version the harness builds when no binary
// is found.
const VersitygwModule = "github.com/versity/versitygw/cmd/versitygw@v1.8.0"

// cacheBinDir is where a built versitygw is kept between test runs.
func cacheBinDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("user cache dir: %w", err)
	}
	return filepath.Join(dir, "deltabus", "bin"), nil
}

// FindVersitygw returns the path of a versitygw binary, building it into the
// cache directory if none is found.
func FindVersitygw() (string, error) {
	if p := os.Getenv("DELTABUS_VERSITYGW"); p != "" {
		if !isExecutable(p) {
			return "", fmt.Errorf("DELTABUS_VERSITYGW=%q is not an executable file", p)
		}
		return p, nil
	}
	cache, err := cacheBinDir()
	if err != nil {
		return "", err
	}
	candidates := []string{filepath.Join(cache, "versitygw"), "/root/.cache/deltabus/bin/versitygw"}
	if gopath, err := goEnv("GOPATH"); err == nil && gopath != "" {
		first := strings.Split(gopath, string(os.PathListSeparator))[0]
		candidates = append(candidates, filepath.Join(first, "bin", "versitygw"))
	}
	for _, p := range candidates {
		if isExecutable(p) {
			return p, nil
		}
	}
	return buildVersitygw(cache)
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

func goEnv(name string) (string, error) {
	out, err := exec.Command("go", "env", name).Output()
	return strings.TrimSpace(string(out)), err
}

// buildVersitygw runs go install into dir (a few minutes cold).
func buildVersitygw(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("build versitygw: %w", err)
	}
	cmd := exec.Command("go", "install", VersitygwModule)
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go install %s: %w\n%s", VersitygwModule, err, out.Bytes())
	}
	p := filepath.Join(dir, "versitygw")
	if !isExecutable(p) {
		return "", errors.New("go install versitygw produced no binary at " + p)
	}
	return p, nil
}
