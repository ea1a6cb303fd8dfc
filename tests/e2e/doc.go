// Package e2e holds DeltaBus's end-to-end and fault tests: real relay
// processes (built from cmd/relay) against a real PostgreSQL with
// wal_level=logical (tests/pgtest; 15, or the major DELTABUS_PG_MAJOR
// names: scripts/test.sh runs the core tests on every supported major)
// and a real S3 server (versitygw, tests/s3test), checked row by row
// against the source's exact commit order read from an independent
// replication slot (truth_test.go).
//
// The fault matrix (faults_test.go, foreign_test.go, hostile_test.go,
// privilege_test.go, secrets_test.go) injects each fault into the real
// process or server — S3 refused, erroring or hung through tests/faultproxy,
// a full tmpfs, PostgreSQL killed with SIGKILL, foreign Delta commits,
// forged watermarks from an unprivileged role — and ends with every topic
// equal to the source. Fault scenarios use their own replication slots and
// run in parallel. BenchmarkSoak is the long soak (DELTABUS_SOAK_MINUTES).
package e2e
