package s3test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The credentials the test server accepts.
const (
	AccessKey = "gobatchtest"
	SecretKey = "gobatch-test-secret"
)

// InstallHint says how to get the server binary.
const InstallHint = "versitygw is not installed: run `make tools` (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0 into .tools/bin)"

// Binary returns the path of the versitygw binary: $GOBATCH_VERSITYGW, the repository's
// .tools/bin/versitygw (found from the working directory up), or versitygw on PATH.
func Binary() (string, error) {
	if p := os.Getenv("GOBATCH_VERSITYGW"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("GOBATCH_VERSITYGW=%s: %w; %s", p, err, InstallHint)
		}
		return p, nil
	}
	if dir, err := os.Getwd(); err == nil {
		for ; ; dir = filepath.Dir(dir) {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				p := filepath.Join(dir, ".tools", "bin", "versitygw")
				if _, err := os.Stat(p); err == nil {
					return p, nil
				}
				break
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s", InstallHint)
}

// Server is a running versitygw.
type Server struct {
	URL  string // http://127.0.0.1:PORT
	Root string // the directory whose subdirectories are the buckets
}

// Start runs versitygw over root (its subdirectories, or links to directories, are the
// buckets) until the test ends. The test fails (it does not skip) when
// the binary is missing.
func Start(t testing.TB, root string) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cmd := exec.Command(bin, "--access", AccessKey, "--secret", SecretKey, "--port", addr,
		"--quiet", "--keep-alive", "posix", "--nometa", "--bucketlinks", root)
	log, err := os.CreateTemp(t.TempDir(), "versitygw-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	waitListening(t, addr, log.Name())
	return &Server{URL: "http://" + addr, Root: root}
}

// Serve runs versitygw over buckets (a bucket's name to the directory it serves, linked
// into a temporary root) until the test ends.
func Serve(t testing.TB, buckets map[string]string) *Server {
	t.Helper()
	root := t.TempDir()
	for name, dir := range buckets {
		abs, err := filepath.Abs(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return Start(t, root)
}

// SetEnv points the S3 (and gs://) stores at endpoint (the server or a proxy in front of
// it) with the server's credentials, for the rest of the test.
func SetEnv(t testing.TB, endpoint string) {
	t.Setenv("AWS_ENDPOINT_URL", endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_NO_SIGN_REQUEST", "")
	t.Setenv("GS_ENDPOINT_URL", endpoint)
	t.Setenv("GS_ACCESS_KEY_ID", AccessKey)
	t.Setenv("GS_SECRET_ACCESS_KEY", SecretKey)
}

// StartHTTP serves dir over plain HTTP on 127.0.0.1 until the test ends (net/http's file
// server answers Range requests and HEAD).
func StartHTTP(t testing.TB, dir string) string {
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	return srv.URL
}

func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// waitListening waits up to 20 s for the server to accept connections.
func waitListening(t testing.TB, addr, log string) {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := os.ReadFile(log)
	t.Fatalf("versitygw did not listen on %s within 20 s; its log:\n%s", addr, b)
}

// CopyDir copies the tree src to dst (fixtures into a bucket directory).
func CopyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		t.Fatalf("copy %s to %s: %v", src, dst, err)
	}
}
