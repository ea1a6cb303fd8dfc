// Package procserver runs the third-party servers tests talk to (versitygw
// for S3, local-kms for AWS KMS) as child processes on 127.0.0.1: it waits
// until one answers HTTP and stops it, so every such test helper starts
// and ends its server the same way.
package procserver

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// WaitHTTP polls endpoint until it answers HTTP (any status: an anonymous
// request may get 403), the process exits (done closes; nil for a server
// this process did not start) or timeout passes.
func WaitHTTP(endpoint string, done <-chan struct{}, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		resp, err := client.Get(endpoint + "/")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-done:
			return errors.New("process exited before answering")
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("no answer within %v", timeout)
}

// Stop ends a started server (SIGTERM, SIGKILL after 5 s; done closes when
// cmd.Wait returned) and removes its directory. A nil cmd (an external
// server) is left alone.
func Stop(cmd *exec.Cmd, done <-chan struct{}, dir string) {
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
	}
	os.RemoveAll(dir)
}
