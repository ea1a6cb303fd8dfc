// Package pgtest gives tests a real PostgreSQL with wal_level=logical.
//
// A test binary either uses the server named by DELTABUS_TEST_PG (a DSN with
// superuser rights and replication allowed) or starts one throwaway cluster
// of its own on first use (see package pgcluster). Every test gets its own
// database (NewDB); its replication slots and the database are dropped when
// the test ends. Tests that must restart or stop PostgreSQL get a private
// server (NewServer).
//
// Every cluster runs one installed PostgreSQL major (package pgcluster):
// the default, which DELTABUS_PG_MAJOR changes for a whole test binary, or
// the one a test asks for (NewServerVersion, NewDBVersion; Versions lists
// the supported ones installed).
//
// A missing PostgreSQL is a test failure, never a skip.
package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/deltabus/deltabus/pgcluster"
)

// Server is a private throwaway cluster.
type Server = pgcluster.Server

// StartServer starts a cluster (see pgcluster.StartServer).
func StartServer(ctx context.Context, extraConf ...string) (*Server, error) {
	return pgcluster.StartServer(ctx, extraConf...)
}

// NewServer starts a private cluster for one test and stops it at cleanup.
func NewServer(t testing.TB, extraConf ...string) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := pgcluster.StartServer(ctx, extraConf...)
	if err != nil {
		t.Fatalf("start PostgreSQL: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StandbyOptions says how a standby streams (pgcluster.StandbyOptions).
type StandbyOptions = pgcluster.StandbyOptions
