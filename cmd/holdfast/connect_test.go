package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
)

// deadAddr returns a loopback address where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestRedisUnreachable(t *testing.T) {
	addr := deadAddr(t)
	for _, args := range [][]string{
		{"exec", "--redis", addr, "-w", "20", "job", "--", "true"},
		{"exec", "--redis", "redis://" + addr, "job", "--", "true"},
		{"status", "--redis", addr, "job"},
		{"list", "--redis", addr},
	} {
		r := runHoldfast(t, args...)
		if r.code != exitUnreachable {
			t.Errorf("holdfast %q: exit %d, want %d (stderr %q)", args, r.code, exitUnreachable, r.stderr)
		}
		if !strings.Contains(r.stderr, "connection refused") {
			t.Errorf("holdfast %q: stderr %q does not say why", args, r.stderr)
		}
	}
	// HOLDFAST_REDIS is used when --redis is not given.
	cmd := holdfastCmd("exec", "job", "--", "true")
	cmd.Env = append(cmd.Env, "HOLDFAST_REDIS=redis://"+addr)
	err := cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != exitUnreachable {
		t.Fatalf("with HOLDFAST_REDIS: %v, exit %d, want %d", err, code, exitUnreachable)
	}
}

// A server whose default user is off: only user "ops" with its password gets
// in.
func startPasswordServer(t *testing.T) *redistest.Server {
	srv := redistest.Start(t)
	srv.Do(t, "ACL", "SETUSER", "ops", "on", ">Open-Sesame-42", "~*", "&*", "+@all")
	srv.Do(t, "ACL", "SETUSER", "scriptless", "on", ">No-Scripts-42", "~*", "&*", "+@all", "-@scripting")
	srv.Do(t, "ACL", "SETUSER", "noincr", "on", ">No-Incr-42", "~*", "&*", "+@all", "-incr")
	srv.Do(t, "ACL", "SETUSER", "default", "off")
	return srv
}

func TestExecWithPassword(t *testing.T) {
	srv := startPasswordServer(t)
	url := "redis://ops:Open-Sesame-42@" + srv.Addr
	r := runHoldfast(t, "exec", "--redis", url, "guarded", "--", "sh", "-c", `test "$HOLDFAST_LOCK" = guarded`)
	if r.code != 0 {
		t.Fatalf("exec with user and password: exit %d, stderr %q", r.code, r.stderr)
	}

	// The same through HOLDFAST_REDIS, and status as that user.
	cmd := holdfastCmd("status", "guarded")
	cmd.Env = append(cmd.Env, "HOLDFAST_REDIS="+url)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "guarded") {
		t.Fatalf("status through HOLDFAST_REDIS: %v\n%s", err, out)
	}

	for _, tc := range []struct {
		url, secret string
		code        int
	}{
		{"redis://ops:Wrong-Secret-99@" + srv.Addr, "Wrong-Secret-99", exitNoPerm}, // WRONGPASS
		{"redis://:Wrong-Secret-99@" + srv.Addr, "Wrong-Secret-99", exitNoPerm},    // default user, off
		{"redis://" + srv.Addr, "", exitNoPerm},                                    // NOAUTH
		{"redis://ops:Wrong/Secret#99@" + srv.Addr, "Secret", exitUsage},           // malformed
		{"redis://ops:Wrong-Secret-99@" + srv.Addr + "/x/y", "Wrong-Secret-99", exitUsage},
	} {
		r := runHoldfast(t, "exec", "--redis", tc.url, "guarded", "--", "true")
		if r.code != tc.code {
			t.Errorf("--redis %s: exit %d, want %d (stderr %q)", tc.url, r.code, tc.code, r.stderr)
		}
		if tc.secret != "" && strings.Contains(r.stderr+r.stdout, tc.secret) {
			t.Errorf("--redis %s: output shows the password: %q", tc.url, r.stderr)
		}
		t.Logf("--redis %s -> exit %d: %s", tc.url, r.code, strings.TrimSpace(r.stderr))
	}
}

// A user that may not run scripts is told so (exit 77), not left waiting.
func TestNotPermitted(t *testing.T) {
	srv := startPasswordServer(t)
	url := "redis://scriptless:No-Scripts-42@" + srv.Addr
	// This one passes the Inspect before the wait; the acquire script's
	// INCR (the fencing token) is denied, and the Lock ends with ErrRedis at once.
	denied := "redis://noincr:No-Incr-42@" + srv.Addr
	for _, args := range [][]string{
		{"status", "--redis", url, "guarded"},
		{"exec", "--redis", url, "guarded", "--", "true"}, // no --wait: it would wait forever
		{"exec", "--redis", denied, "guarded", "--", "true"},
	} {
		r := runHoldfast(t, args...)
		if r.code != exitNoPerm || !(strings.Contains(r.stderr, "NOPERM") || strings.Contains(r.stderr, "can't run this command")) {
			t.Errorf("holdfast %s: exit %d, stderr %q; want %d and the server's denial", args[0], r.code, r.stderr, exitNoPerm)
		}
		if strings.Contains(r.stderr, "No-Scripts-42") || strings.Contains(r.stderr, "No-Incr-42") {
			t.Errorf("holdfast %s: stderr shows the password: %q", args[0], r.stderr)
		}
		t.Logf("holdfast %s -> exit %d: %s", args[0], r.code, strings.TrimSpace(r.stderr))
	}
}

// Flags may stand before NAME or between NAME and "--"; a plain -w number is
// seconds, as for flock.
func TestExecFlagPositions(t *testing.T) {
	srv := redistest.Start(t)
	c, err := holdfast.New(holdfast.Config{Redis: srv.Client(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := c.Lock(context.Background(), "busy")
	if err := l.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"exec", "busy", "--redis", srv.Addr, "-w", "0.2", "--", "true"}, "within 200ms"},
		{[]string{"exec", "--redis", srv.Addr, "busy", "--wait", "0", "--", "true"}, "within 0s"},
		{[]string{"exec", "-w", "150ms", "busy", "--redis=" + srv.Addr, "--", "true"}, "within 150ms"},
	} {
		r := runHoldfast(t, tc.args...)
		if r.code != exitNotTaken || !strings.Contains(r.stderr, tc.says) {
			t.Errorf("holdfast %q: exit %d, stderr %q; want %d saying %q", tc.args, r.code, r.stderr, exitNotTaken, tc.says)
		}
	}
	if r := runHoldfast(t, "exec", "free", "-w", "1", "--redis", srv.Addr, "--", "true"); r.code != 0 {
		t.Fatalf("exec with -w 1: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestListAndForceUnlock(t *testing.T) {
	srv := redistest.Start(t)
	c, err := holdfast.New(holdfast.Config{Redis: srv.Client(t), ClientID: "svc1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for _, n := range []string{"job:1", "job:2", "other"} {
		if err := c.Lock(ctx, n).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	r := runHoldfast(t, "list", "--redis", srv.Addr)
	if r.code != 0 || r.stdout != "job:1\njob:2\nother\n" {
		t.Fatalf("list: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runHoldfast(t, "list", "job:*", "--redis", srv.Addr)
	if r.code != 0 || r.stdout != "job:1\njob:2\n" {
		t.Fatalf("list job:*: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runHoldfast(t, "force-unlock", "--redis", srv.Addr, "job:1", "never-held")
	// The holder is svc1:INSTANCE:~1 (see scripts.Field).
	if r.code != 0 || !strings.Contains(r.stdout, "job:1: freed (was held by svc1:") || !strings.Contains(r.stdout, ":~1)") || !strings.Contains(r.stdout, "never-held: was free") {
		t.Fatalf("force-unlock: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runHoldfast(t, "list", "job:*", "--redis", srv.Addr)
	if r.stdout != "job:2\n" {
		t.Fatalf("list after force-unlock: %q", r.stdout)
	}
}

// --fair takes the fair lock (its token comes from the shared fence counter),
// and a name in use as the reentrant lock refuses it at once.
func TestExecFair(t *testing.T) {
	srv := redistest.Start(t)
	r := runHoldfast(t, "exec", "--fair", "--redis", srv.Addr, "fairq", "--", "sh", "-c", "echo $HOLDFAST_TOKEN")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "1" {
		t.Fatalf("exec --fair: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	c, err := holdfast.New(holdfast.Config{Redis: srv.Client(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Lock(context.Background(), "plain").Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	r = runHoldfast(t, "exec", "--fair", "--redis", srv.Addr, "plain", "--", "true")
	if r.code != exitFailure || !strings.Contains(r.stderr, "another kind") {
		t.Fatalf("exec --fair on a reentrant lock: exit %d, stderr %q; want %d saying another kind", r.code, r.stderr, exitFailure)
	}
}

// Redis going away while exec waits ends it with the unreachable code, not
// "not acquired".
func TestExecRedisDownWhileWaiting(t *testing.T) {
	srv := redistest.Start(t)
	c, err := holdfast.New(holdfast.Config{Redis: srv.Client(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Lock(context.Background(), "busy").Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	cmd := holdfastCmd("exec", "--redis", srv.Addr, "-w", "3", "busy", "--", "true")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// exec waits once it has subscribed to the lock's channel.
	deadline := time.Now().Add(15 * time.Second)
	for {
		subs, _ := srv.Do(t, "PUBSUB", "NUMSUB", scripts.Channel("busy")).AsIntMap()
		if subs[scripts.Channel("busy")] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("exec never waited on the lock's channel")
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.Kill()
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitUnreachable {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitUnreachable, stderr.String())
	}
	t.Logf("stderr: %s", strings.TrimSpace(stderr.String()))
}

// --read holders share NAME; --write waits for them.
func TestExecReadWrite(t *testing.T) {
	srv := redistest.Start(t)
	c, err := holdfast.New(holdfast.Config{Redis: srv.Client(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.ReadLock(ctx, "doc").Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if r := runHoldfast(t, "exec", "--read", "-w", "5", "--redis", srv.Addr, "doc", "--", "true"); r.code != 0 {
		t.Fatalf("exec --read beside a reader: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runHoldfast(t, "exec", "--write", "-w", "0.3", "--redis", srv.Addr, "doc", "--", "true"); r.code != exitNotTaken {
		t.Fatalf("exec --write beside a reader: exit %d, stderr %q; want %d", r.code, r.stderr, exitNotTaken)
	}
	if r := runHoldfast(t, "status", "--redis", srv.Addr, "doc"); r.code != 0 || !strings.Contains(r.stdout, "doc   rw") || !strings.Contains(r.stdout, "(read)") {
		t.Fatalf("status of a read-held name: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := runHoldfast(t, "exec", "--read", "--fair", "doc", "--", "true"); r.code != exitUsage {
		t.Fatalf("exec --read --fair: exit %d, want %d", r.code, exitUsage)
	}
}
