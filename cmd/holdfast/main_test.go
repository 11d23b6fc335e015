package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
)

// The test binary doubles as the holdfast command when this is set.
const asMain = "HOLDFAST_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) != "" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

type result struct {
	code           int
	stdout, stderr string
}

// holdfastCmd returns the command `holdfast args...`.
func holdfastCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asMain+"=1")
	return cmd
}

func runHoldfast(t *testing.T, args ...string) result {
	t.Helper()
	cmd := holdfastCmd(args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("running holdfast %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return result{code, out.String(), errb.String()}
}

func TestExecRunsCommandsOneAtATime(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	script := `echo "start $(date +%s%N) $HOLDFAST_TOKEN $HOLDFAST_LOCK" >> ` + filepath.Join(dir, "log") +
		`; sleep 0.3; echo "end $(date +%s%N)" >> ` + filepath.Join(dir, "log")
	var wg sync.WaitGroup
	results := make([]result, 3)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = runHoldfast(t, "exec", "--redis", srv.Addr, "nightly", "--", "sh", "-c", script)
		}()
	}
	wg.Wait()
	for _, r := range results {
		if r.code != 0 {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 6 {
		t.Fatalf("log has %d lines:\n%s", len(lines), data)
	}
	// Runs never interleave: start, end, start, end, … with rising tokens.
	var lastEnd int64
	var tokens []int
	for i := 0; i < len(lines); i += 2 {
		start, end := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if start[0] != "start" || end[0] != "end" {
			t.Fatalf("interleaved runs:\n%s", data)
		}
		s, _ := strconv.ParseInt(start[1], 10, 64)
		e, _ := strconv.ParseInt(end[1], 10, 64)
		if s < lastEnd {
			t.Fatalf("a run started before the previous one ended:\n%s", data)
		}
		lastEnd = e
		tok, _ := strconv.Atoi(start[2])
		tokens = append(tokens, tok)
		if start[3] != "nightly" {
			t.Fatalf("HOLDFAST_LOCK = %q", start[3])
		}
	}
	if !sort.IntsAreSorted(tokens) || tokens[0] == tokens[1] || tokens[1] == tokens[2] {
		t.Fatalf("tokens %v are not strictly rising", tokens)
	}
	if n, _ := srv.Do(t, "EXISTS", scripts.LockKey("nightly")).AsInt64(); n != 0 {
		t.Fatal("lock left held after the commands ended")
	}
}

func TestExecPropagatesExitCode(t *testing.T) {
	srv := redistest.Start(t)
	if r := runHoldfast(t, "exec", "--redis", srv.Addr, "codes", "--", "sh", "-c", "exit 7"); r.code != 7 {
		t.Fatalf("exit %d, want 7 (stderr %q)", r.code, r.stderr)
	}
	if r := runHoldfast(t, "exec", "--redis", srv.Addr, "codes", "--", "sh", "-c", "kill -TERM $$"); r.code != 128+15 {
		t.Fatalf("exit %d, want 143 for a command killed by SIGTERM", r.code)
	}
}

func TestExecLockLostStopsCommand(t *testing.T) {
	srv := redistest.Start(t)
	cmd := holdfastCmd("exec", "--redis", srv.Addr, "--watchdog", "600ms", "--kill-after", "2s", "doomed", "--", "sleep", "30")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if n, _ := srv.Do(t, "EXISTS", scripts.LockKey("doomed")).AsInt64(); n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("exec never took the lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // the command is running
	srv.Do(t, "DEL", scripts.LockKey("doomed"))
	start := time.Now()
	err := cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != exitLost {
		t.Fatalf("exec ended with %v, want exit code %d; stderr %q", err, exitLost, errb.String())
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the command ran %v after the lock was lost", took)
	}
	if !strings.Contains(errb.String(), "lost") {
		t.Fatalf("stderr does not say the lock was lost: %q", errb.String())
	}
}

// TestExecLostBeforeRenewalNoticed: CMD frees its own lock with
// `holdfast force-unlock` and exits before a renewal is due (the watchdog
// is a minute long), so only the final Release finds the hold gone. exec
// still exits with the lost status, whatever CMD's own status, for every
// kind of lock and both layouts.
func TestExecLostBeforeRenewalNoticed(t *testing.T) {
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name   string
		flags  []string
		status int // CMD's own exit status
	}{
		{"lock", nil, 0},
		{"lock-failing-cmd", nil, 3},
		{"fair", []string{"--fair"}, 0},
		{"read", []string{"--read"}, 0},
		{"write", []string{"--write"}, 0},
		{"semaphore", []string{"--permits", "2"}, 0},
		{"redisson", []string{"--layout", "redisson"}, 0},
		{"redisson-write", []string{"--layout", "redisson", "--write"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			layout := []string{}
			if slices.Contains(tc.flags, "redisson") {
				layout = []string{"--layout", "redisson"}
			}
			// The test binary is holdfast under asMain, which CMD inherits.
			unlock := strings.Join(append([]string{os.Args[0], "force-unlock", "--redis", srv.Addr}, layout...), " ")
			script := fmt.Sprintf("%s %s >/dev/null && exit %d", unlock, tc.name, tc.status)
			args := append([]string{"exec", "--redis", srv.Addr, "--watchdog", "60s"}, tc.flags...)
			args = append(args, tc.name, "--", "sh", "-c", script)
			start := time.Now()
			r := runHoldfast(t, args...)
			if r.code != exitLost {
				t.Fatalf("exit %d, want %d (lock lost); stderr %q", r.code, exitLost, r.stderr)
			}
			// A renewal would have said "command stopped"; this loss was
			// found by the Release, after CMD's own exit.
			if took := time.Since(start); took > 15*time.Second {
				t.Fatalf("exec took %v: a renewal may have found the loss first", took)
			}
			want := fmt.Sprintf("holdfast: lock %q lost while the command ran (Redis no longer shows this owner holding the lock", tc.name)
			if !strings.HasPrefix(r.stderr, want) || !strings.Contains(r.stderr, fmt.Sprintf("the command had exited with status %d", tc.status)) ||
				strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Fatalf("stderr %q, want one line starting %q and naming status %d", r.stderr, want, tc.status)
			}
		})
	}
	// A command that leaves the lock alone still ends with its own status.
	if r := runHoldfast(t, "exec", "--redis", srv.Addr, "--watchdog", "60s", "kept", "--", "true"); r.code != 0 || r.stderr != "" {
		t.Fatalf("exec of a command that kept its lock: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestExecWaitTimeout(t *testing.T) {
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
	r := runHoldfast(t, "exec", "--redis", srv.Addr, "-w", "200ms", "busy", "--", "true")
	if r.code != exitNotTaken {
		t.Fatalf("exit %d, want %d; stderr %q", r.code, exitNotTaken, r.stderr)
	}
	if !strings.Contains(r.stderr, "not acquired") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

func TestStatusShowsHolder(t *testing.T) {
	srv := redistest.Start(t)
	c, err := holdfast.New(holdfast.Config{Redis: srv.Client(t), ClientID: "svc1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := holdfast.WithOwner(context.Background(), "job")
	l := c.Lock(ctx, "report")
	if err := l.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := runHoldfast(t, "status", "--redis", srv.Addr, "report", "free-one")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	t.Logf("status output:\n%s", r.stdout)
	// The holder's field is svc1:INSTANCE:job (see scripts.Field).
	if header, _, _ := strings.Cut(r.stdout, "\n"); !strings.Contains(header, "HOLDER (CLIENTID:INSTANCE:OWNER)") {
		t.Fatalf("status heads its holders %q", header)
	}
	if !strings.Contains(r.stdout, "svc1:") || !strings.Contains(r.stdout, ":job") || !strings.Contains(r.stdout, "report    lock") || !strings.Contains(r.stdout, "free-one  free") {
		t.Fatalf("status output lacks the holder:\n%s", r.stdout)
	}
	r = runHoldfast(t, "status", "--json", "report", "--redis", srv.Addr) // flags after names too
	var sts []lockStatus
	if err := json.Unmarshal([]byte(r.stdout), &sts); err != nil {
		t.Fatalf("json: %v\n%s", err, r.stdout)
	}
	if len(sts) != 1 || sts[0].Kind != holdfast.KindLock || len(sts[0].Holders) != 1 ||
		!isOwner(sts[0].Holders[0], "svc1", "job") || sts[0].Holders[0].Count != 1 || sts[0].TTLms <= 0 || sts[0].Fence != l.Token() {
		t.Fatalf("status %+v", sts)
	}
}

// isOwner reports whether h is owner of a Client labelled clientID.
func isOwner(h holder, clientID, owner string) bool {
	id, _, o, ok := scripts.ParseField(h.Owner)
	return ok && id == clientID && o == owner
}

func TestUsageErrors(t *testing.T) {
	cases := [][]string{
		{},
		{"frobnicate"},
		{"exec", "name", "true"},
		{"exec", "name", "--"},
		{"exec", "--wait", "soon", "name", "--", "true"},
		{"exec", "-w", "-1", "name", "--", "true"},
		{"exec", "name", "extra", "--", "true"},
		{"status"},
		{"status", ""},
		{"list", "a*", "b*"},
		{"force-unlock"},
		// Options are checked before Redis is dialled: these name an
		// address where nothing listens and still get exit 2, not 69.
		{"exec", "--redis", "127.0.0.1:1", "--lease", "1ms", "name", "--", "true"},
		{"exec", "--redis", "127.0.0.1:1", "--lease", "1s", "--watchdog", "2s", "name", "--", "true"},
		{"exec", "--redis", "127.0.0.1:1", "}bad", "--", "true"},
		{"status", "--redis", "127.0.0.1:1", "}bad"},
		{"exec", "--redis", "redis://h:1/x/y", "name", "--", "true"},
		{"exec", "--redis", "ftp://h:1", "name", "--", "true"},
	}
	for _, args := range cases {
		r := runHoldfast(t, args...)
		if r.code != exitUsage {
			t.Errorf("holdfast %q: exit %d, want %d (stderr %q)", args, r.code, exitUsage, r.stderr)
		}
		if len(args) > 0 && strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("holdfast %q: stderr is not one line: %q", args, r.stderr)
		}
		if len(args) > 0 && (!strings.HasPrefix(r.stderr, "holdfast: ") || strings.Count(r.stderr, "holdfast:") != 1) {
			t.Errorf("holdfast %q: stderr %q, want one holdfast: prefix", args, r.stderr)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{
		{"help"}, {"--help"}, {"exec", "--help"}, {"exec", "-h"}, {"exec", "name", "--help"},
		{"status", "--help"}, {"list", "-h"}, {"force-unlock", "--help"}, {"demo", "--help"}, {"help", "exec"},
	} {
		r := runHoldfast(t, args...)
		if r.code != 0 || r.stderr != "" {
			t.Errorf("holdfast %q: exit %d, stderr %q; want 0 and help on stdout", args, r.code, r.stderr)
		}
		want := "usage: holdfast"
		if args[0] != "help" && args[0] != "--help" {
			want += " " + args[0]
		}
		if !strings.HasPrefix(r.stdout, want) || !strings.Contains(r.stdout, "master_set=") || !strings.Contains(r.stdout, "77 not permitted") {
			t.Errorf("holdfast %q: help lacks its usage line, the URL forms or the exit codes:\n%s", args, r.stdout)
		}
	}
}

func TestDemo(t *testing.T) {
	r := runHoldfast(t, "demo")
	if r.code != 0 {
		t.Fatalf("demo exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"ACQUIRED", "woken by pub/sub", "LOST", "REJECTS", "Summary", "losses detected           2 of 2"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("demo output lacks %q:\n%s", want, r.stdout)
		}
	}
}
