package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
)

// elect makes c lead name with value, and fails t if it cannot.
func elect(t *testing.T, c *holdfast.Client, name, value string) *holdfast.Lock {
	t.Helper()
	l := c.Elect(context.Background(), name, value)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Wait(ctx); err != nil {
		t.Fatalf("electing %s: %v", value, err)
	}
	return l
}

func TestLeaderCommand(t *testing.T) {
	srv := redistest.Start(t)
	c, err := holdfast.New(holdfast.Config{Redis: srv.Client(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	if r := runHoldfast(t, "leader", "--redis", srv.Addr, "jobs"); r.code != 0 || r.stdout != "nobody leads\n" {
		t.Fatalf("nobody leading: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r := runHoldfast(t, "leader", "--redis", srv.Addr, "--json", "jobs")
	var got leaderLine
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != 0 || got != (leaderLine{Name: "jobs"}) {
		t.Fatalf("--json with nobody leading: exit %d, stdout %q (%v)", r.code, r.stdout, err)
	}

	l := elect(t, c, "jobs", "10.0.0.7:8080")
	want := fmt.Sprintf("10.0.0.7:8080 (term %d)\n", l.Token())
	if r := runHoldfast(t, "leader", "--redis", srv.Addr, "jobs"); r.code != 0 || r.stdout != want {
		t.Fatalf("leading: exit %d, stdout %q, want %q; stderr %q", r.code, r.stdout, want, r.stderr)
	}
	r = runHoldfast(t, "leader", "jobs", "--json", "--redis", srv.Addr)
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != 0 ||
		got != (leaderLine{Name: "jobs", Leading: true, Value: "10.0.0.7:8080", Term: l.Token()}) {
		t.Fatalf("--json while leading: exit %d, stdout %q (%v)", r.code, r.stdout, err)
	}
	l.Release(context.Background())

	// A value that would break the line is quoted.
	l = elect(t, c, "jobs", "two\nlines")
	if r := runHoldfast(t, "leader", "--redis", srv.Addr, "jobs"); r.stdout != fmt.Sprintf("\"two\\nlines\" (term %d)\n", l.Token()) {
		t.Fatalf("stdout %q", r.stdout)
	}
	l.Release(context.Background())

	// Another kind's name is an error; so are bad arguments.
	lock := c.Lock(context.Background(), "plain")
	if err := lock.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer lock.Release(context.Background())
	if r := runHoldfast(t, "leader", "--redis", srv.Addr, "plain"); r.code != exitFailure || !strings.Contains(r.stderr, "another kind") {
		t.Fatalf("a lock's name: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, args := range [][]string{{"leader"}, {"leader", "a", "b"}, {"leader", "}x"}, {"leader", "--bogus", "a"}} {
		if r := runHoldfast(t, append(args, "--redis", srv.Addr)...); r.code != exitUsage || strings.Count(r.stderr, "\n") != 1 {
			t.Fatalf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	if r := runHoldfast(t, "leader", "--redis", deadAddr(t), "jobs"); r.code != exitUnreachable {
		t.Fatalf("unreachable Redis: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestLeaderWatch: --watch prints the state first, then a line per change
// (a grant, a resignation, an expiry), promptly, and exits 0 on SIGTERM.
func TestLeaderWatch(t *testing.T) {
	srv := redistest.Start(t)
	c, err := holdfast.New(holdfast.Config{Redis: srv.Client(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first := elect(t, c, "sched", "a")

	cmd := holdfastCmd("leader", "--watch", "--json", "--redis", srv.Addr, "sched")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan leaderLine, 16) // closer: the reader below
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var l leaderLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				l.Value = "unparsable: " + sc.Text()
			}
			lines <- l
		}
	}()
	next := func(what string, within time.Duration) leaderLine {
		t.Helper()
		select {
		case l := <-lines:
			return l
		case <-time.After(within):
			t.Fatalf("no line for %s within %v; stderr %q", what, within, errb.String())
		}
		panic("unreachable")
	}

	if l := next("the current state", 10*time.Second); l != (leaderLine{"sched", true, "a", first.Token()}) {
		t.Fatalf("first line %+v, want leader a of term %d", l, first.Token())
	}
	first.Release(context.Background())
	if l := next("the resignation", time.Second); l != (leaderLine{Name: "sched"}) {
		t.Fatalf("after the resignation %+v, want nobody", l)
	}
	second := elect(t, c, "sched", "b")
	if l := next("the new leader", time.Second); l != (leaderLine{"sched", true, "b", second.Token()}) || second.Token() <= first.Token() {
		t.Fatalf("after the grant %+v, want leader b of term %d (> %d)", l, second.Token(), first.Token())
	}
	second.Release(context.Background())
	if l := next("the second resignation", time.Second); l.Leading {
		t.Fatalf("after the second resignation %+v", l)
	}
	// A leader whose lease runs out unreleased: Redis announces nothing,
	// the watch says so at the lease's end.
	third := c.Elect(context.Background(), "sched", "c", holdfast.WithLease(500*time.Millisecond))
	if err := third.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l := next("the third leader", time.Second); l.Value != "c" || l.Term != third.Token() {
		t.Fatalf("third leader %+v", l)
	}
	if l := next("the expiry", 500*time.Millisecond+time.Second); l.Leading {
		t.Fatalf("after the expiry %+v", l)
	}
	select {
	case l := <-lines:
		t.Fatalf("a line while nothing changed: %+v", l)
	case <-time.After(300 * time.Millisecond):
	}

	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("watch ended with %v after SIGTERM, want exit 0; stderr %q", err, errb.String())
	}
}

// startQuietWatch starts `holdfast leader --watch` of an election nobody
// leads and reads its first line; it returns the command, its stdout
// scanner and its stderr. The command is killed when the test ends.
func startQuietWatch(t *testing.T, srv *redistest.Server) (*exec.Cmd, *bufio.Scanner, io.Reader) {
	t.Helper()
	cmd := holdfastCmd("leader", "--watch", "--redis", srv.Addr, "quiet")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "nobody leads" {
		t.Fatalf("first line %q, want nobody leads", sc.Text())
	}
	return cmd, sc, errPipe
}

func TestLeaderWatchPlain(t *testing.T) {
	srv := redistest.Start(t)
	cmd, sc, _ := startQuietWatch(t, srv)
	cmd.Process.Signal(syscall.SIGINT)
	if sc.Scan() {
		t.Fatalf("more output: %q", sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("watch ended with %v after SIGINT, want exit 0", err)
	}
}

// TestLeaderWatchSaysWhenRedisIsUnreachable: a watch whose Redis goes away
// says so on stderr, once, goes on watching, and says when Redis answers
// again; once Redis is back empty, it prints the new leader though its term
// (1) is below the one it printed before the loss.
func TestLeaderWatchSaysWhenRedisIsUnreachable(t *testing.T) {
	srv := redistest.Start(t)
	cmd, sc, errPipe := startQuietWatch(t, srv)
	stderr := make(chan string, 16) // closer: the reader below
	go func() {
		defer close(stderr)
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			stderr <- sc.Text()
		}
	}()
	stdout := make(chan string, 16) // closer: the reader below
	go func() {
		defer close(stdout)
		for sc.Scan() {
			stdout <- sc.Text()
		}
	}()
	next := func(ch <-chan string, what string) string {
		t.Helper()
		select {
		case line := <-ch:
			return line
		case <-time.After(15 * time.Second):
			t.Fatalf("no line for %s", what)
		}
		panic("unreachable")
	}
	c, err := holdfast.New(holdfast.Config{Redis: srv.Client(t), WatchdogTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first := elect(t, c, "quiet", "a")
	if line := next(stdout, "the first leader"); line != "a (term 1)" {
		t.Fatalf("stdout %q, want a (term 1)", line)
	}
	first.Release(context.Background())
	if line := next(stdout, "the resignation"); line != "nobody leads" {
		t.Fatalf("stdout %q, want nobody leads", line)
	}
	elect(t, c, "quiet", "b")
	if line := next(stdout, "the second leader"); line != "b (term 2)" {
		t.Fatalf("stdout %q, want b (term 2)", line)
	}
	select {
	case line := <-stderr:
		t.Fatalf("stderr while Redis answers: %q", line)
	default:
	}

	srv.Kill()
	if line := next(stderr, "Redis gone"); !strings.Contains(line, `cannot read "quiet" from Redis`) {
		t.Fatalf("stderr %q, want that Redis cannot be read", line)
	}
	select {
	case line := <-stderr:
		t.Fatalf("a second line while Redis is away: %q", line)
	case line := <-stdout:
		t.Fatalf("stdout while Redis is away: %q", line)
	case <-time.After(3 * time.Second):
	}
	srv.Restart() // empty: b's hold is gone, and terms start again at 1
	if line := next(stderr, "Redis back"); !strings.Contains(line, "Redis answers again") {
		t.Fatalf("stderr %q, want that Redis answers again", line)
	}
	if line := next(stdout, "the vacancy after the restart"); line != "nobody leads" {
		t.Fatalf("stdout %q, want nobody leads", line)
	}
	elect(t, c, "quiet", "c")
	if line := next(stdout, "the leader after the restart"); line != "c (term 1)" {
		t.Fatalf("stdout %q, want c (term 1)", line)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if line, ok := <-stdout; ok {
		t.Fatalf("more output on stdout: %q", line)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("watch ended with %v after SIGTERM, want exit 0", err)
	}
}

// TestExecElect: candidates run their commands one at a time, each with
// its term (rising) as HOLDFAST_TOKEN, and leader shows who runs.
func TestExecElect(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	// Each run records its value, its term and what `holdfast leader`
	// shows while it runs.
	script := `echo "start $HOLDFAST_TOKEN $HOLDFAST_LOCK $(` + os.Args[0] + ` leader --redis ` + srv.Addr + ` cron)" >> ` + log +
		`; sleep 0.2; echo end >> ` + log
	var wg sync.WaitGroup
	results := make([]result, 3)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = runHoldfast(t, "exec", "--redis", srv.Addr, "--elect", "node-"+strconv.Itoa(i), "cron", "--", "sh", "-c", script)
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
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 6 {
		t.Fatalf("log has %d lines:\n%s", len(lines), data)
	}
	var last uint64
	seen := map[string]bool{}
	for i := 0; i < len(lines); i += 2 {
		// start TERM NAME VALUE (term TERM)
		f := strings.Fields(lines[i])
		if len(f) != 6 || f[0] != "start" || lines[i+1] != "end" || f[2] != "cron" || f[5] != f[1]+")" {
			t.Fatalf("runs interleaved, or leader showed another term:\n%s", data)
		}
		term, _ := strconv.ParseUint(f[1], 10, 64)
		if term <= last {
			t.Fatalf("terms not rising:\n%s", data)
		}
		last = term
		seen[f[3]] = true
	}
	if len(seen) != 3 {
		t.Fatalf("leaders %v, want each of the three values once:\n%s", seen, data)
	}
	if n, _ := srv.Do(t, "EXISTS", scripts.LockKey("cron")).AsInt64(); n != 0 {
		t.Fatal("the last leader did not resign")
	}
}

// TestExecElectLost: a leader deposed (force-unlock) has its command
// stopped and exits 76; a campaign on a lock's name, a bad value and a
// second kind flag are refused.
func TestExecElectLost(t *testing.T) {
	srv := redistest.Start(t)
	cmd := holdfastCmd("exec", "--redis", srv.Addr, "--elect", "me", "--watchdog", "600ms", "--kill-after", "2s", "deposed", "--", "sleep", "30")
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitUntil(t, "the campaign to lead", func() bool {
		return strings.HasPrefix(runHoldfast(t, "leader", "--redis", srv.Addr, "deposed").stdout, "me (term ")
	})
	if r := runHoldfast(t, "force-unlock", "--redis", srv.Addr, "deposed"); r.code != 0 {
		t.Fatalf("force-unlock: exit %d, stderr %q", r.code, r.stderr)
	}
	start := time.Now()
	err := cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitLost {
		t.Fatalf("exec ended with %v, want exit %d; stderr %q", err, exitLost, errb.String())
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the command ran %v after the leadership was lost", took)
	}
	if !strings.Contains(errb.String(), `leadership of "deposed" lost`) {
		t.Fatalf("stderr does not say the leadership was lost: %q", errb.String())
	}

	c, err := holdfast.New(holdfast.Config{Redis: srv.Client(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lock := c.Lock(context.Background(), "plain")
	if err := lock.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer lock.Release(context.Background())
	if r := runHoldfast(t, "exec", "--redis", srv.Addr, "--elect", "me", "plain", "--", "true"); r.code != exitFailure || !strings.Contains(r.stderr, "another kind") {
		t.Fatalf("--elect on a lock's name: exit %d, stderr %q", r.code, r.stderr)
	}
	// A campaign with a wait budget on a led name ends as a busy lock does.
	led := elect(t, c, "led", "incumbent")
	defer led.Release(context.Background())
	if r := runHoldfast(t, "exec", "--redis", srv.Addr, "--elect", "me", "-w", "200ms", "led", "--", "true"); r.code != exitNotTaken {
		t.Fatalf("--elect -w 200ms on a led name: exit %d, want %d; stderr %q", r.code, exitNotTaken, r.stderr)
	}
	for _, args := range [][]string{
		{"--elect", "", "x"},
		{"--elect", strings.Repeat("v", holdfast.MaxValueLen+1), "x"},
		{"--elect", "me", "--fair", "x"},
		{"--elect", "me", "--layout", "redisson", "x"},
	} {
		args = append(append([]string{"exec", "--redis", srv.Addr}, args...), "--", "true")
		if r := runHoldfast(t, args...); r.code != exitUsage {
			t.Fatalf("%q: exit %d, want %d; stderr %q", args[3:], r.code, exitUsage, r.stderr)
		}
	}
}
