package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redissontest"
	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
)

// TestExecPermits: five `exec --permits 2` processes at once run their
// commands at most two at a time, and at some point two at once.
func TestExecPermits(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	script := `echo "start $(date +%s%N) $HOLDFAST_TOKEN" >> ` + log + `; sleep 0.4; echo "end $(date +%s%N)" >> ` + log
	var wg sync.WaitGroup
	results := make([]result, 5)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = runHoldfast(t, "exec", "--permits", "2", "--redis", srv.Addr, "pool", "--", "sh", "-c", script)
		}()
	}
	wg.Wait()
	for _, r := range results {
		if r.code != 0 {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	tokens := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		at, _ := strconv.ParseInt(f[1], 10, 64)
		if f[0] == "start" {
			edges = append(edges, edge{at, 1})
			if tokens[f[2]] {
				t.Fatalf("token %s given twice:\n%s", f[2], data)
			}
			tokens[f[2]] = true
		} else {
			edges = append(edges, edge{at, -1})
		}
	}
	if len(edges) != 10 {
		t.Fatalf("log has %d lines:\n%s", len(edges), data)
	}
	// Ends before starts at the same instant: a run that ended let the next in.
	sort.Slice(edges, func(i, j int) bool {
		return edges[i].at < edges[j].at || edges[i].at == edges[j].at && edges[i].delta < edges[j].delta
	})
	running, most := 0, 0
	for _, e := range edges {
		running += e.delta
		most = max(most, running)
	}
	if most != 2 {
		t.Fatalf("at most %d commands ran at once on 2 permits:\n%s", most, data)
	}
	if n, _ := srv.Do(t, "EXISTS", scripts.LockKey("pool")).AsInt64(); n != 0 {
		t.Fatal("semaphore left held after the commands ended")
	}
}

// TestExecPermitsStatusAndMistakes: status shows a semaphore's permits and
// holders; another count, a count below 1 and a second kind flag are refused.
func TestExecPermitsStatusAndMistakes(t *testing.T) {
	srv := redistest.Start(t)
	c, err := holdfast.New(holdfast.Config{Redis: srv.Client(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Semaphore(ctx, "exports", 3).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if r := runHoldfast(t, "status", "--redis", srv.Addr, "exports"); r.code != 0 || !strings.Contains(r.stdout, "semaphore/3") {
		t.Fatalf("status of a semaphore: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := runHoldfast(t, "status", "--json", "--redis", srv.Addr, "exports"); r.code != 0 || !strings.Contains(r.stdout, `"permits": 3`) {
		t.Fatalf("status --json of a semaphore: exit %d, stdout %q", r.code, r.stdout)
	}
	if r := runHoldfast(t, "exec", "--permits", "3", "-w", "5", "--redis", srv.Addr, "exports", "--", "true"); r.code != 0 {
		t.Fatalf("exec --permits 3 beside one holder: exit %d, stderr %q", r.code, r.stderr)
	}
	want := `holdfast: semaphore "exports" has 3 permits, not --permits 2: every user of a name must give the same --permits` + "\n"
	if r := runHoldfast(t, "exec", "--permits", "2", "--redis", srv.Addr, "exports", "--", "true"); r.code != exitFailure || r.stderr != want {
		t.Fatalf("exec --permits 2 on a semaphore of 3: exit %d, stderr %q, want %q", r.code, r.stderr, want)
	}
	for _, args := range [][]string{
		{"exec", "--permits", "0", "x", "--", "true"},
		{"exec", "--permits", "2", "--fair", "x", "--", "true"},
	} {
		if r := runHoldfast(t, args...); r.code != exitUsage {
			t.Fatalf("%v: exit %d, want %d (stderr %q)", args, r.code, exitUsage, r.stderr)
		}
	}
}

// TestLayoutRedisson: with --layout redisson (or HOLDFAST_LAYOUT), status
// shows a lock a Java process holds with Redisson, force-unlock frees it, and
// exec takes the name as Redisson's RLock.
func TestLayoutRedisson(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	java := redissontest.New(srv.Client(t), "java-ops")
	defer java.Close()
	if err := java.Lock(ctx, "invoices", 3, -1); err != nil {
		t.Fatal(err)
	}
	r := runHoldfast(t, "status", "--layout", "redisson", "--redis", srv.Addr, "invoices")
	if r.code != 0 || !strings.Contains(r.stdout, "java-ops:3") {
		t.Fatalf("status --layout redisson of a Java hold: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// The owner column is headed by the shape of its rows: Redisson's fields.
	if header, _, _ := strings.Cut(r.stdout, "\n"); !strings.Contains(header, "HOLDER (ID:THREAD)") || strings.Contains(header, "CLIENTID") {
		t.Fatalf("status --layout redisson heads its holders %q", header)
	}
	if r := runHoldfast(t, "list", "--layout", "redisson", "--redis", srv.Addr); r.code != 0 || strings.TrimSpace(r.stdout) != "invoices" {
		t.Fatalf("list --layout redisson: exit %d, stdout %q", r.code, r.stdout)
	}
	if r := runHoldfast(t, "exec", "--layout", "redisson", "-w", "0.3", "--redis", srv.Addr, "invoices", "--", "true"); r.code != exitNotTaken {
		t.Fatalf("exec while Java holds: exit %d, stderr %q", r.code, r.stderr)
	}
	cmd := holdfastCmd("force-unlock", "--redis", srv.Addr, "invoices")
	cmd.Env = append(cmd.Env, "HOLDFAST_LAYOUT=redisson")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("force-unlock with HOLDFAST_LAYOUT=redisson: %v, %s", err, out)
	}
	if held, _ := java.IsLocked(ctx, "invoices"); held {
		t.Fatal("the Java lock is still there after force-unlock")
	}
	r = runHoldfast(t, "exec", "--layout", "redisson", "--redis", srv.Addr, "invoices", "--", "sh", "-c", "redis-cli -p "+strconv.Itoa(srv.Port())+" hgetall invoices")
	if r.code != 0 || !regexp.MustCompile(`(?m)^[^:\s]+:[0-9]+\n1$`).MatchString(strings.TrimSpace(r.stdout)) {
		t.Fatalf("exec --layout redisson: exit %d, the hash seen by CMD %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{
		{"exec", "--layout", "redisson", "--elect", "me", "x", "--", "true"},
		{"exec", "--layout", "cobol", "x", "--", "true"},
	} {
		if r := runHoldfast(t, args...); r.code != exitUsage {
			t.Fatalf("%v: exit %d, want %d", args, r.code, exitUsage)
		}
	}
}
