package pgcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Where each PostgreSQL major version's server binaries are. A bin
// directory holds at least initdb, pg_ctl and postgres; its major is what
// its postgres --version says, never what its path suggests.
//
//   - DELTABUS_PG_BINS, a colon-separated list of bin directories, names
//     every installed major when set;
//   - otherwise they are found: DELTABUS_PG_BIN, BinDir, Debian's
//     /usr/lib/postgresql/*/bin and the per-major prefixes of
//     scripts/deps.sh, DELTABUS_PG_ROOT/*/bin (default /opt/deltabus/pg).
//
// The first directory of a major wins. DELTABUS_PG_MAJOR picks the major
// StartServer runs (every cluster of a test binary, say); without it,
// StartServer runs DELTABUS_PG_BIN's binaries, or BinDir's.
const (
	// PackagesRoot is where scripts/deps.sh installs the majors Debian
	// does not ship, one prefix each (<root>/<major>/bin); DELTABUS_PG_ROOT
	// overrides it.
	PackagesRoot = "/opt/deltabus/pg"
	debianRoot   = "/usr/lib/postgresql"
)

var (
	installedOnce sync.Once
	installed     map[int]string
	installedErr  error
)

// Installed returns the bin directory of every PostgreSQL major version
// found (see above), by major. It looks once per process.
func Installed() (map[int]string, error) {
	installedOnce.Do(func() { installed, installedErr = findInstalled() })
	return installed, installedErr
}

// Majors returns the installed major versions, oldest first.
func Majors() ([]int, error) {
	bins, err := Installed()
	if err != nil {
		return nil, err
	}
	majors := make([]int, 0, len(bins))
	for m := range bins {
		majors = append(majors, m)
	}
	slices.Sort(majors)
	return majors, nil
}

// DefaultMajor is the major version StartServer runs: DELTABUS_PG_MAJOR,
// or that of DELTABUS_PG_BIN's (or BinDir's) binaries.
func DefaultMajor() (int, error) {
	if m, ok, err := envMajor(); ok || err != nil {
		return m, err
	}
	return binMajor(binDir())
}

// BinDirOf returns the bin directory of an installed major version, or an
// error that says how to install it.
func BinDirOf(major int) (string, error) {
	bins, err := Installed()
	if err != nil {
		return "", err
	}
	if dir, ok := bins[major]; ok {
		return dir, nil
	}
	have, _ := Majors()
	return "", fmt.Errorf("PostgreSQL %d is not installed (found: %s): run `bash scripts/deps.sh pgversions`, or list its bin directory in DELTABUS_PG_BINS", major, majorList(have))
}

// defaultBinDir is the bin directory StartServer runs.
func defaultBinDir() (string, error) {
	m, ok, err := envMajor()
	if err != nil {
		return "", err
	}
	if !ok {
		return binDir(), nil
	}
	return BinDirOf(m)
}

func envMajor() (int, bool, error) {
	v := os.Getenv("DELTABUS_PG_MAJOR")
	if v == "" {
		return 0, false, nil
	}
	m, err := strconv.Atoi(v)
	if err != nil || m < 10 {
		return 0, false, fmt.Errorf("DELTABUS_PG_MAJOR=%q is not a PostgreSQL major version (14, 15, ...)", v)
	}
	return m, true, nil
}

func findInstalled() (map[int]string, error) {
	var dirs []string
	if list := os.Getenv("DELTABUS_PG_BINS"); list != "" {
		dirs = filepath.SplitList(list)
	} else {
		dirs = candidateDirs()
	}
	bins := map[int]string{}
	for i, dir := range dirs {
		if slices.Contains(dirs[:i], dir) {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err != nil {
			if os.Getenv("DELTABUS_PG_BINS") != "" {
				return nil, fmt.Errorf("DELTABUS_PG_BINS names %s, which has no initdb", dir)
			}
			continue
		}
		m, err := binMajor(dir)
		if err != nil {
			return nil, err
		}
		if _, seen := bins[m]; !seen {
			bins[m] = dir
		}
	}
	return bins, nil
}

// candidateDirs lists the bin directories to look in, in order of
// preference, when DELTABUS_PG_BINS is not set.
func candidateDirs() []string {
	dirs := []string{binDir(), BinDir}
	deb, _ := filepath.Glob(filepath.Join(debianRoot, "*", "bin"))
	dirs = append(dirs, deb...)
	root := os.Getenv("DELTABUS_PG_ROOT")
	if root == "" {
		root = PackagesRoot
	}
	pkgs, _ := filepath.Glob(filepath.Join(root, "*", "bin"))
	return append(dirs, pkgs...)
}

// binMajor runs dir's postgres --version ("postgres (PostgreSQL) 17.10",
// "... 18beta1", "... 16.4 (Debian 16.4-1)") and returns its major.
func binMajor(dir string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(dir, "postgres"), "--version").Output()
	if err != nil {
		return 0, fmt.Errorf("%s --version: %w", filepath.Join(dir, "postgres"), err)
	}
	return parseMajor(string(out))
}

func parseMajor(version string) (int, error) {
	_, v, ok := strings.Cut(version, "(PostgreSQL) ")
	if !ok {
		return 0, fmt.Errorf("not a PostgreSQL version: %q", strings.TrimSpace(version))
	}
	end := strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(v)
	}
	m, err := strconv.Atoi(v[:end])
	if err != nil {
		return 0, fmt.Errorf("not a PostgreSQL version: %q", strings.TrimSpace(version))
	}
	return m, nil
}

func majorList(majors []int) string {
	if len(majors) == 0 {
		return "none"
	}
	s := make([]string, len(majors))
	for i, m := range majors {
		s[i] = strconv.Itoa(m)
	}
	return strings.Join(s, ", ")
}
