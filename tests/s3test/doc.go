// Package s3test gives tests a real S3 server: a versitygw gateway (posix
// backend on a temporary directory) started once per test binary on
// 127.0.0.1, or the server named by DELTABUS_TEST_S3
// (http://ACCESS:SECRET@127.0.0.1:PORT). Each NewBucket is a fresh, uniquely
// named bucket, so tests never see each other's objects.
//
// Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(s3test.Run(m)) }
//
// The versitygw binary is found at $DELTABUS_VERSITYGW,
// /root/.cache/deltabus/bin/versitygw (or $XDG_CACHE_HOME/deltabus/bin) or
// $(go env GOPATH)/bin/versitygw, and is built once with
// "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0" into the
// cache directory when none is found. A server that cannot be started fails
// the test; it is never skipped. The child process is killed when the test
// binary dies (Pdeathsig on Linux) and stopped by Run otherwise.
package s3test
