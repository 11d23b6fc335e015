package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/internal/topology"
	"github.com/holdfast/holdfast/scripts"
)

// startProcess runs a Redis binary until the test ends and waits until addr
// answers PING.
func startProcess(t *testing.T, addr string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitUntil(t, name+" answering on "+addr, func() bool {
		out, err := exec.Command("redis-cli", "-u", "redis://"+addr, "PING").Output()
		return err == nil && strings.TrimSpace(string(out)) == "PONG"
	})
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startSentinel runs a Sentinel that monitors srv as master set "jobs",
// with requirepass when password is not empty, and returns its address.
func startSentinel(t *testing.T, srv *redistest.Server, password string) string {
	t.Helper()
	sentinel := deadAddr(t)
	host, port, _ := net.SplitHostPort(srv.Addr)
	_, sport, _ := net.SplitHostPort(sentinel)
	conf := "port " + sport + "\nbind 127.0.0.1\nprotected-mode no\nsentinel monitor jobs " + host + " " + port + " 1\n"
	ping := sentinel // startProcess PINGs through redis-cli -u
	if password != "" {
		conf += "requirepass " + password + "\n"
		ping = "default:" + password + "@" + sentinel
	}
	path := filepath.Join(t.TempDir(), "sentinel.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	startProcess(t, ping, "redis-server", path, "--sentinel")
	return sentinel
}

// exec and status reach the primary through a Sentinel URL.
func TestSentinelURL(t *testing.T) {
	srv := redistest.Start(t)
	sentinel := startSentinel(t, srv, "")

	url := "redis://" + sentinel + "?master_set=jobs"
	r := runHoldfast(t, "exec", "--redis", url, "nightly", "--", "sh", "-c", "echo $HOLDFAST_TOKEN")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "1" {
		t.Fatalf("exec through Sentinel: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if fence, err := srv.Do(t, "GET", scripts.FenceKey("nightly")).AsInt64(); err != nil || fence != 1 {
		t.Fatalf("the primary's fence is %d (%v) after the exec through Sentinel, want 1", fence, err)
	}
	r = runHoldfast(t, "status", "--redis", url, "nightly")
	if r.code != 0 || !strings.Contains(r.stdout, "nightly") {
		t.Fatalf("status through Sentinel: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// A Sentinel with a password of its own: sentinel_password carries it, the
// URL's password stays the primary's, and no output shows either.
func TestSentinelURLWithPassword(t *testing.T) {
	srv := redistest.Start(t)
	sentinel := startSentinel(t, srv, "s3ntinel-secret")

	base := "redis://" + sentinel + "?master_set=jobs"
	r := runHoldfast(t, "exec", "--redis", base+"&sentinel_password=wr0ng-secret", "nightly", "--", "true")
	if r.code == 0 {
		t.Fatalf("exec with the wrong Sentinel password succeeded")
	}
	if strings.Contains(r.stdout+r.stderr, "wr0ng-secret") {
		t.Fatalf("output shows the Sentinel password: %q", r.stderr)
	}
	r = runHoldfast(t, "exec", "--redis", base+"&sentinel_password=s3ntinel-secret", "nightly", "--", "sh", "-c", "echo $HOLDFAST_TOKEN")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "1" {
		t.Fatalf("exec through a Sentinel with a password: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runHoldfast(t, "exec", "--redis", "redis://"+srv.Addr+"?sentinel_password=s3ntinel-secret", "nightly", "--", "true")
	if r.code != exitUsage || !strings.Contains(r.stderr, "need master_set") || strings.Contains(r.stderr, "s3ntinel-secret") {
		t.Fatalf("sentinel_password without master_set: exit %d, stderr %q", r.code, r.stderr)
	}
}

// exec, status and list work on a cluster named by several seed addresses
// (here the one node of a cluster that owns every slot, twice over).
func TestClusterURL(t *testing.T) {
	// Its cluster bus gets a free port of its own: the default, port+10000,
	// is past 65535 for about a fifth of the ports the kernel hands out
	// (32768–60999 here).
	addr := topology.StartNode(t, "--cluster-enabled", "yes", "--save", "", "--appendonly", "no").Addr
	if out, err := exec.Command("redis-cli", "-u", "redis://"+addr, "CLUSTER", "ADDSLOTSRANGE", "0", "16383").CombinedOutput(); err != nil {
		t.Fatalf("CLUSTER ADDSLOTSRANGE: %v %s", err, out)
	}
	waitUntil(t, "cluster_state:ok", func() bool {
		out, _ := exec.Command("redis-cli", "-u", "redis://"+addr, "CLUSTER", "INFO").Output()
		return strings.Contains(string(out), "cluster_state:ok")
	})

	url := "redis://" + addr + "?addr=" + addr
	for i := 1; i <= 2; i++ {
		r := runHoldfast(t, "exec", "--redis", url, "job:"+strconv.Itoa(i), "--", "true")
		if r.code != 0 {
			t.Fatalf("exec on the cluster: exit %d, stderr %q", r.code, r.stderr)
		}
	}
	hold := holdfastCmd("exec", "--redis", url, "job:held", "--", "sleep", "30")
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hold.Process.Kill(); hold.Wait() })
	waitUntil(t, "job:held to be held", func() bool {
		return runHoldfast(t, "list", "--redis", url, "job:*").stdout == "job:held\n"
	})
	r := runHoldfast(t, "status", "--redis", url, "job:held", "job:1")
	if r.code != 0 || !strings.Contains(r.stdout, "job:held  lock") || !strings.Contains(r.stdout, "job:1     free") {
		t.Fatalf("status on the cluster: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// exec runs over TLS with a rediss:// URL; without skip_verify the
// self-signed certificate is refused.
func TestTLSURL(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writeSelfSigned(t, dir)
	addr := deadAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("redis-server", "--port", "0", "--tls-port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--protected-mode", "no",
		"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-ca-cert-file", certFile,
		"--tls-auth-clients", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitUntil(t, "TLS port "+addr, func() bool {
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	r := runHoldfast(t, "exec", "--redis", "rediss://"+addr+"?skip_verify=true", "secure", "--", "sh", "-c", "echo $HOLDFAST_TOKEN")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "1" {
		t.Fatalf("exec over TLS: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runHoldfast(t, "exec", "--redis", "rediss://"+addr, "secure", "--", "true")
	if r.code == 0 || !strings.Contains(r.stderr, "certificate") {
		t.Fatalf("a self-signed certificate was accepted without skip_verify: exit %d, stderr %q", r.code, r.stderr)
	}
	t.Logf("without skip_verify: exit %d: %s", r.code, strings.TrimSpace(r.stderr))
}

// writeSelfSigned writes a self-signed certificate for 127.0.0.1 and its key
// as PEM files in dir.
func writeSelfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "holdfast test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
