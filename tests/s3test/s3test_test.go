package s3test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

func TestMain(m *testing.M) { os.Exit(Run(m)) }

func TestNewBucketIsFreshAndUsable(t *testing.T) {
	a, b := NewBucket(t), NewBucket(t)
	if a.Bucket == b.Bucket || a.Endpoint != b.Endpoint {
		t.Fatalf("buckets %q and %q on %q / %q", a.Bucket, b.Bucket, a.Endpoint, b.Endpoint)
	}
	c := a.Client()
	_, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(a.Bucket), Key: aws.String("k"),
		Body: strings.NewReader("v")})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(b.Bucket)})
	if err != nil || len(out.Contents) != 0 {
		t.Fatalf("second bucket sees %d objects (%v), want 0", len(out.Contents), err)
	}
	cfg := a.S3Config("pre")
	if cfg.Bucket != a.Bucket || cfg.Prefix != "pre" || !cfg.UsePathStyle || cfg.Endpoint != a.Endpoint {
		t.Fatalf("S3Config = %+v", cfg)
	}
}

func TestBucketName(t *testing.T) {
	for _, name := range []string{"TestX", "TestS3Conformance/PutIfAbsentRace#01", strings.Repeat("VeryLong_", 20)} {
		b := bucketName(name)
		if len(b) < 3 || len(b) > 63 || strings.Trim(b, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			t.Errorf("bucketName(%q) = %q: not a valid bucket name", name, b)
		}
	}
}

// TestExternalServer: DELTABUS_TEST_S3 parsing against the running server.
func TestExternalServer(t *testing.T) {
	srv, err := getServer()
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.endpoint, "http://")
	ext, err := externalServer("http://" + srv.accessKey + ":" + srv.secretKey + "@" + host)
	if err != nil {
		t.Fatal(err)
	}
	if ext.endpoint != srv.endpoint || ext.accessKey != srv.accessKey || ext.secretKey != srv.secretKey || ext.cmd != nil {
		t.Fatalf("external server = %+v, want endpoint %s with the same keys", ext, srv.endpoint)
	}
	if _, err := externalServer("http://127.0.0.1:1"); err == nil {
		t.Fatal("externalServer without credentials succeeded")
	}
}

// TestChildDiesWithTestBinary: a test binary killed with SIGKILL (no
// cleanup runs) takes its versitygw with it (Pdeathsig).
func TestChildDiesWithTestBinary(t *testing.T) {
	if os.Getenv("S3TEST_CHILD") == "1" {
		srv, err := getServer()
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		fmt.Println("PID", srv.cmd.Process.Pid)
		time.Sleep(time.Minute) // killed by the parent
		return
	}
	if os.Getenv("DELTABUS_TEST_S3") != "" {
		t.Log("external server in use; checking with a started one anyway")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildDiesWithTestBinary$")
	cmd.Env = append(os.Environ(), "S3TEST_CHILD=1", "DELTABUS_TEST_S3=")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "PID ")))
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child said %q", line)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("versitygw %d not running: %v", pid, err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if gone(pid) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	t.Fatalf("versitygw %d outlived its killed test binary", pid)
}

// gone reports whether pid no longer runs (absent, or a zombie awaiting a
// reaper that may never come in a container).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}
