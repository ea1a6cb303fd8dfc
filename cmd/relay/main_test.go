package main

import (
	"os"
	"testing"

	"github.com/deltabus/deltabus/tests/pgtest"
)

// TestMain stops the throwaway PostgreSQL the tests that need one share
// (tests/pgtest), after every test of the package ran.
func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }
