package holdfast_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
)

// Election tests on a real redis-server.

// electChildMode makes the child process (see runChild) campaign for the
// election named by its value with a 1s watchdog lease, print "held" once
// it leads, and lead until it is killed.
const electChildMode = "HOLDFAST_TEST_CHILD_ELECT"

func runElectChild() {
	if os.Getenv(electCampaignMode) != "" {
		runCampaignChild()
		return
	}
	c := childClient(holdfast.Config{WatchdogTimeout: time.Second})
	holdUntilKilled(c.Elect(context.Background(), os.Getenv(electChildMode), "child"))
}

// leads reports which of ls has Acquired closed and Lost open.
func leads(ls []*holdfast.Lock) []int {
	var out []int
	for i, l := range ls {
		select {
		case <-l.Lost:
			continue
		default:
		}
		select {
		case <-l.Acquired:
			out = append(out, i)
		default:
		}
	}
	return out
}

// nextLeader waits up to d for one of ls to lead and returns its index.
func nextLeader(t *testing.T, ls []*holdfast.Lock, d time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if got := leads(ls); len(got) > 0 {
			return got[0]
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("nobody leads within %v", d)
	return -1
}

// recv waits up to d for a state on ch.
func recv(t *testing.T, ch <-chan holdfast.Leader, d time.Duration) holdfast.Leader {
	t.Helper()
	select {
	case st, ok := <-ch:
		if !ok {
			t.Fatal("observer channel closed")
		}
		return st
	case <-time.After(d):
		t.Fatalf("no state observed within %v", d)
	}
	return holdfast.Leader{}
}

// TestElectOneLeaderAndHandover: of four Clients campaigning, exactly one
// leads at any time; each resignation hands leadership to a waiting
// candidate within 100 ms, with a higher term; Leader and Inspect show the
// leader.
func TestElectOneLeaderAndHandover(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	const name = "elect-handover"
	var cs []*holdfast.Client
	var ls []*holdfast.Lock
	for i := range 4 {
		c := newClient(t, srv, holdfast.Config{})
		cs = append(cs, c)
		ls = append(ls, c.Elect(ctx, name, fmt.Sprintf("node-%d", i)))
	}
	cur := nextLeader(t, ls, waitFor)
	var term uint64
	for round := 0; ; round++ {
		time.Sleep(50 * time.Millisecond) // let the others settle into waiting
		if got := leads(ls); len(got) != 1 || got[0] != cur {
			t.Fatalf("round %d: leaders %v, want only %d", round, got, cur)
		}
		l := ls[cur]
		if l.Token() <= term {
			t.Fatalf("round %d: term %d after %d", round, l.Token(), term)
		}
		term = l.Token()
		got, err := cs[0].Leader(ctx, name)
		if err != nil || got != (holdfast.Leader{Value: fmt.Sprintf("node-%d", cur), Term: term}) {
			t.Fatalf("round %d: Leader = %+v, %v; want node-%d, term %d", round, got, err, cur, term)
		}
		info, err := cs[0].Inspect(ctx, name)
		if err != nil || info.Kind != holdfast.KindElection || len(info.Holders) != 1 || info.TTL <= 0 || info.Fence < term {
			t.Fatalf("round %d: Inspect = %+v, %v", round, info, err)
		}
		if round == 3 {
			break
		}
		resigned := time.Now()
		if err := l.Release(ctx); err != nil {
			t.Fatalf("resign: %v", err)
		}
		mustLose(t, l, holdfast.ErrReleased)
		next := nextLeader(t, ls, waitFor)
		took := time.Since(resigned)
		t.Logf("round %d: node-%d resigned, node-%d leads %v later", round, cur, next, took)
		if took > 100*time.Millisecond {
			t.Fatalf("handover took %v, want within 100ms", took)
		}
		cur = next
	}
	ls[cur].Release(ctx)
	if got, err := cs[1].Leader(ctx, name); err != nil || got != (holdfast.Leader{}) {
		t.Fatalf("Leader after the last resignation = %+v, %v; want nobody", got, err)
	}
	noLockKeys(t, srv)
}

// TestElectKilledLeaderSuccessor: a leader process killed with SIGKILL is
// succeeded by a waiting candidate within its lease (1s) plus 300 ms.
func TestElectKilledLeaderSuccessor(t *testing.T) {
	srv := redistest.Start(t)
	const name = "elect-killed"
	cmd := startChild(t, "held", childEnv+"="+srv.Addr, electChildMode+"="+name)
	c := newClient(t, srv, holdfast.Config{})
	l := c.Elect(context.Background(), name, "successor")
	// Let the candidate wait through a few of the leader's renewals.
	time.Sleep(1500 * time.Millisecond)
	if heldWithin(l, 0) {
		t.Fatal("the candidate leads beside a live leader")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	mustAcquire(t, l)
	took := time.Since(killed)
	t.Logf("the successor leads %v after the SIGKILL of the leader (lease 1s)", took)
	if took > time.Second+300*time.Millisecond {
		t.Fatalf("successor leads %v after the kill, want within lease + 300ms", took)
	}
	l.Release(context.Background())
}

// TestObserveVacancyAtLeaseEnd: observers of a leader process that is
// killed learn of the vacancy within its lease (1s) plus 200 ms, though
// nothing announces it.
func TestObserveVacancyAtLeaseEnd(t *testing.T) {
	srv := redistest.Start(t)
	const name = "elect-vacancy"
	cmd := startChild(t, "held", childEnv+"="+srv.Addr, electChildMode+"="+name)
	c := newClient(t, srv, holdfast.Config{})
	ch := c.Observe(t.Context(), name)
	first := recv(t, ch, waitFor)
	if first.Value != "child" || first.Term == 0 {
		t.Fatalf("first state %+v, want the child leading", first)
	}
	time.Sleep(1200 * time.Millisecond) // through renewals: nothing to tell
	select {
	case st := <-ch:
		t.Fatalf("told %+v while nothing changed", st)
	default:
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	st := recv(t, ch, waitFor)
	took := time.Since(killed)
	t.Logf("vacancy observed %v after the SIGKILL of the leader (lease 1s)", took)
	if st != (holdfast.Leader{}) {
		t.Fatalf("observed %+v, want the vacancy", st)
	}
	if took > time.Second+200*time.Millisecond {
		t.Fatalf("vacancy observed %v after the kill, want within lease + 200ms", took)
	}
}

// TestObserveSeesEveryChange: ten observers of one Client see the state
// first, then each grant and resignation within 100 ms, never a lower
// term; they share one subscription; a reader that fell behind gets the
// latest state; the channels close with their context and with the Client.
func TestObserveSeesEveryChange(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	const name = "elect-observe"
	a, b := newClient(t, srv, holdfast.Config{}), newClient(t, srv, holdfast.Config{})
	obs := newClient(t, srv, holdfast.Config{})
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	var chs []<-chan holdfast.Leader
	for range 10 {
		chs = append(chs, obs.Observe(octx, name))
	}
	slow := obs.Observe(octx, name) // read only at the end
	for i, ch := range chs {
		if st := recv(t, ch, waitFor); st != (holdfast.Leader{}) {
			t.Fatalf("observer %d: first state %+v, want nobody", i, st)
		}
	}
	if n := numsub(t, srv, scripts.Channel(name)); n != 1 {
		t.Fatalf("%d subscriptions to the election's channel for 11 observers of one Client, want 1", n)
	}
	expect := func(what string, at time.Time, want holdfast.Leader) {
		t.Helper()
		for i, ch := range chs {
			st := recv(t, ch, waitFor)
			if took := time.Since(at); took > 100*time.Millisecond {
				t.Fatalf("%s: observer %d told %v later, want within 100ms", what, i, took)
			}
			if st != want {
				t.Fatalf("%s: observer %d told %+v, want %+v", what, i, st, want)
			}
		}
	}
	var last holdfast.Leader
	for i, c := range []*holdfast.Client{a, b, a} {
		l := c.Elect(ctx, name, fmt.Sprintf("leader-%d", i))
		mustAcquire(t, l)
		granted := time.Now()
		cur := holdfast.Leader{Value: fmt.Sprintf("leader-%d", i), Term: l.Token()}
		if cur.Term <= last.Term {
			t.Fatalf("term %d after %d", cur.Term, last.Term)
		}
		expect("grant", granted, cur)
		last = cur
		resigned := time.Now()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		expect("resignation", resigned, holdfast.Leader{})
	}
	// The slow reader: the latest state (the vacancy), then nothing.
	if st := recv(t, slow, waitFor); st != (holdfast.Leader{}) {
		t.Fatalf("slow reader got %+v, want the latest state (nobody)", st)
	}
	select {
	case st := <-slow:
		t.Fatalf("slow reader got %+v after the latest state", st)
	default:
	}
	// Channels close with their context, and the subscription goes.
	cancel()
	for i, ch := range append(chs, slow) {
		select {
		case _, ok := <-ch:
			if ok {
				t.Fatalf("observer %d: a state after its context ended", i)
			}
		case <-time.After(waitFor):
			t.Fatalf("observer %d: channel not closed with its context", i)
		}
	}
	deadline := time.Now().Add(waitFor)
	for numsub(t, srv, scripts.Channel(name)) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the subscription outlived its observers")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// With the Client: a last state says why, keeping the state read.
	ch := obs.Observe(ctx, name)
	recv(t, ch, waitFor)
	obs.Close()
	if st := recv(t, ch, waitFor); !errors.Is(st.Err, holdfast.ErrClosed) || st.Term != 0 {
		t.Fatalf("the last state after the Client closed is %+v, want the vacancy with ErrClosed", st)
	}
	if st, ok := <-ch; ok {
		t.Fatalf("a state after the Client closed's: %+v", st)
	}
	ch = obs.Observe(ctx, name)
	if st, ok := <-ch; !ok || !errors.Is(st.Err, holdfast.ErrClosed) {
		t.Fatalf("Observe on a closed Client told %+v, %v; want ErrClosed", st, ok)
	}
	if _, ok := <-ch; ok {
		t.Fatal("Observe on a closed Client did not close its channel")
	}
}

// TestElectIdleCostsNothing: with a leader, a waiting candidate and
// observers in other Clients, an election costs Redis no command while
// nothing changes (the watchdog's lease is 30 s: no renewal is due and no
// lease ends in the quiet period). The candidate and the observers of one
// Client share one subscription.
func TestElectIdleCostsNothing(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	const name = "elect-idle"
	a, b, o := newClient(t, srv, holdfast.Config{}), newClient(t, srv, holdfast.Config{}), newClient(t, srv, holdfast.Config{})
	l := a.Elect(ctx, name, "a")
	mustAcquire(t, l)
	cand := b.Elect(ctx, name, "b")
	for range 5 {
		recv(t, o.Observe(t.Context(), name), waitFor)
		recv(t, b.Observe(t.Context(), name), waitFor)
	}
	waitSubscribed(t, srv, name)
	time.Sleep(300 * time.Millisecond)
	if n := numsub(t, srv, scripts.Channel(name)); n != 2 {
		t.Fatalf("%d subscriptions for the observers of two Clients (one with a candidate), want 2", n)
	}
	probe := srv.Client(t) // one connection: its handshake is before the period
	before := commandStats(t, probe)
	time.Sleep(2 * time.Second)
	after := commandStats(t, probe)
	for cmd, n := range after {
		switch cmd {
		case "info", "ping":
			continue // the test's own and the connections' keep-alives
		}
		if d := n - before[cmd]; d != 0 {
			t.Errorf("%d %s calls in a quiet period of an idle election", d, cmd)
		}
	}
	if heldWithin(cand, 0) {
		t.Fatal("the candidate leads beside the leader")
	}
	notLost(t, l)
}

// commandStats is INFO commandstats: calls per command.
func commandStats(t *testing.T, rdb rueidis.Client) map[string]int64 {
	t.Helper()
	info, err := rdb.Do(context.Background(), rdb.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		if !ok {
			continue
		}
		cmd, stats, _ := strings.Cut(rest, ":calls=")
		var n int64
		fmt.Sscanf(stats, "%d", &n)
		out[cmd] = n
	}
	return out
}

// TestElectKindsAndInput: an election name refuses the other kinds and
// they refuse it (ErrWrongKind), whatever shape their key has; a led name
// ends a try-once campaign with ErrWaitTimeout; bad names and values and
// the Redisson layout end Elect at once.
func TestElectKindsAndInput(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	a, b := newClient(t, srv, holdfast.Config{}), newClient(t, srv, holdfast.Config{})

	leader := a.Elect(ctx, "elected", "a")
	mustAcquire(t, leader)
	others := map[string]*holdfast.Lock{
		"Lock":      b.Lock(ctx, "elected"),
		"FairLock":  b.FairLock(ctx, "elected"),
		"ReadLock":  b.ReadLock(ctx, "elected"),
		"WriteLock": b.WriteLock(ctx, "elected"),
		"Semaphore": b.Semaphore(ctx, "elected", 2),
	}
	for kind, l := range others {
		select {
		case <-l.Lost:
			if !errors.Is(l.Err(), holdfast.ErrWrongKind) {
				t.Fatalf("%s on an election: %v, want ErrWrongKind", kind, l.Err())
			}
		case <-time.After(waitFor):
			t.Fatalf("%s on an election not refused", kind)
		}
	}
	mustLose(t, b.Elect(ctx, "elected", "b", holdfast.WithWait(0)), holdfast.ErrWaitTimeout)
	notLost(t, leader)

	for kind, l := range map[string]*holdfast.Lock{
		"Lock":      a.Lock(ctx, "k-lock"),
		"FairLock":  a.FairLock(ctx, "k-fair"),
		"ReadLock":  a.ReadLock(ctx, "k-rw"),
		"Semaphore": a.Semaphore(ctx, "k-sem", 2),
	} {
		mustAcquire(t, l)
		mustLose(t, b.Elect(ctx, l.Name(), "b"), holdfast.ErrWrongKind)
		if _, err := b.Leader(ctx, l.Name()); !errors.Is(err, holdfast.ErrWrongKind) {
			t.Fatalf("Leader of a %s: %v, want ErrWrongKind", kind, err)
		}
		l.Release(ctx)
	}
	// Keys of shapes no kind of this version writes: a string at the
	// name's key, and a fair queue without a holder.
	srv.Do(t, "SET", scripts.LockKey("k-string"), "x", "PX", "60000")
	mustLose(t, b.Elect(ctx, "k-string", "b"), holdfast.ErrWrongKind)
	srv.Do(t, "HSET", scripts.FairQueueKey("k-queued"), "someone", "1")
	mustLose(t, b.Elect(ctx, "k-queued", "b"), holdfast.ErrWrongKind)
	srv.Do(t, "DEL", scripts.LockKey("k-string"), scripts.FairQueueKey("k-queued"))

	mustLose(t, b.Elect(ctx, "", "b"), holdfast.ErrInvalidName)
	mustLose(t, b.Elect(ctx, "}x", ""), holdfast.ErrInvalidName) // the name's error first
	mustLose(t, b.Elect(ctx, "v", ""), holdfast.ErrInvalidValue)
	mustLose(t, b.Elect(ctx, "v", strings.Repeat("x", holdfast.MaxValueLen+1)), holdfast.ErrInvalidValue)
	mustLose(t, b.Elect(ctx, "v", "b", holdfast.WithLease(-1)), holdfast.ErrInvalidOption)
	if _, err := b.Leader(ctx, ""); !errors.Is(err, holdfast.ErrInvalidName) {
		t.Fatalf("Leader of an empty name: %v", err)
	}
	for what, c := range map[string]struct {
		ctx  context.Context
		name string
		want error
	}{
		"an empty name": {ctx, "", holdfast.ErrInvalidName},
		"a nil ctx":     {nil, "v", holdfast.ErrInvalidOption},
	} {
		ch := b.Observe(c.ctx, c.name)
		if st, ok := <-ch; !ok || !errors.Is(st.Err, c.want) || st.Term != 0 {
			t.Fatalf("Observe with %s told %+v, %v; want %v", what, st, ok, c.want)
		}
		if _, ok := <-ch; ok {
			t.Fatalf("Observe with %s did not close its channel", what)
		}
	}

	r := newClient(t, srv, holdfast.Config{Layout: holdfast.LayoutRedisson})
	mustLose(t, r.Elect(ctx, "v", "r"), holdfast.ErrNotSupported)
	if _, err := r.Leader(ctx, "v"); !errors.Is(err, holdfast.ErrNotSupported) {
		t.Fatalf("Leader under the Redisson layout: %v", err)
	}
	if st := <-r.Observe(ctx, "v"); !errors.Is(st.Err, holdfast.ErrNotSupported) {
		t.Fatalf("Observe under the Redisson layout told %+v", st)
	}

	// ForceUnlock deposes the leader: the fence moves past its term,
	// observers hear of the vacancy, and the leader learns at its renewal.
	ch := b.Observe(ctx, "elected")
	if st := recv(t, ch, waitFor); st.Term != leader.Token() {
		t.Fatalf("observed %+v, want term %d", st, leader.Token())
	}
	if err := b.ForceUnlock(ctx, "elected"); err != nil {
		t.Fatal(err)
	}
	if st := recv(t, ch, waitFor); st != (holdfast.Leader{}) {
		t.Fatalf("after ForceUnlock observed %+v, want the vacancy", st)
	}
	info, err := b.Inspect(ctx, "elected")
	if err != nil || info.Kind != "" || info.Fence <= leader.Token() {
		t.Fatalf("Inspect after ForceUnlock = %+v, %v", info, err)
	}
	leader.Release(ctx)
	mustLose(t, leader, holdfast.ErrNotOwner)
}

// TestElectReentryAndContext: two campaigns of one owner share the
// leadership and its term; the end of Elect's context resigns.
func TestElectReentryAndContext(t *testing.T) {
	srv := redistest.Start(t)
	a, b := newClient(t, srv, holdfast.Config{}), newClient(t, srv, holdfast.Config{})
	ctx := holdfast.WithOwner(context.Background(), "scheduler")
	outer := a.Elect(ctx, "elect-nest", "a")
	mustAcquire(t, outer)
	cctx, cancel := context.WithCancel(ctx)
	inner := a.Elect(cctx, "elect-nest", "other value")
	mustAcquire(t, inner)
	if inner.Token() != outer.Token() {
		t.Fatalf("nested terms %d and %d", outer.Token(), inner.Token())
	}
	cancel()
	mustLose(t, inner, context.Canceled)
	notLost(t, outer)
	if got, _ := b.Leader(context.Background(), "elect-nest"); got.Value != "a" || got.Term != outer.Token() {
		t.Fatalf("Leader = %+v", got)
	}
	octx, ocancel := context.WithCancel(context.Background())
	l := b.Elect(octx, "elect-ctx", "b")
	mustAcquire(t, l)
	ocancel()
	mustLose(t, l, context.Canceled)
	if got, err := a.Leader(context.Background(), "elect-ctx"); err != nil || got != (holdfast.Leader{}) {
		t.Fatalf("Leader after the leader's context ended = %+v, %v", got, err)
	}
	outer.Release(context.Background())
	noLockKeys(t, srv)
}

// TestElectWithExactlyTheACLRules: campaigning, the watchdog's renewal,
// observing, Leader, Inspect, ForceUnlock, handover and resignation run as
// a user with exactly the documented rights (the election needs no new one).
func TestElectWithExactlyTheACLRules(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	newACLClient := func(user string) *holdfast.Client {
		c, err := holdfast.New(holdfast.Config{Redis: aclClient(t, srv, user, aclRules), WatchdogTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b := newACLClient("elect-a"), newACLClient("elect-b")
	states := b.Observe(t.Context(), "acl-elect")
	if st := recv(t, states, waitFor); st != (holdfast.Leader{}) {
		t.Fatalf("first state %+v", st)
	}
	la := a.Elect(ctx, "acl-elect", "a")
	mustAcquire(t, la)
	if st := recv(t, states, waitFor); st.Term != la.Token() {
		t.Fatalf("observed %+v, want term %d", st, la.Token())
	}
	lb := b.Elect(ctx, "acl-elect", "b")
	time.Sleep(1500 * time.Millisecond) // through the leader's renewals
	notLost(t, la)
	if got, err := b.Leader(ctx, "acl-elect"); err != nil || got.Term != la.Token() {
		t.Fatalf("Leader = %+v, %v", got, err)
	}
	if info, err := b.Inspect(ctx, "acl-elect"); err != nil || info.Kind != holdfast.KindElection {
		t.Fatalf("Inspect = %+v, %v", info, err)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, lb)
	if err := a.ForceUnlock(ctx, "acl-elect"); err != nil {
		t.Fatal(err)
	}
	mustLose(t, lb, holdfast.ErrNotOwner)
}

// electCampaignMode makes the child process (see runChild) campaign for the
// election named by its value with a 1s watchdog lease: it prints
// "campaigning", then "leads TERM" once it leads, and leads until killed.
const electCampaignMode = "HOLDFAST_TEST_CHILD_CAMPAIGN"

func runCampaignChild() {
	c := childClient(holdfast.Config{WatchdogTimeout: time.Second})
	l := c.Elect(context.Background(), os.Getenv(electCampaignMode), fmt.Sprint(os.Getpid()))
	fmt.Println("campaigning")
	if err := l.Wait(context.Background()); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("leads", l.Token())
	<-l.Lost
	fmt.Println("lost", l.Err())
	os.Exit(1)
}

// TestElectAmongProcesses: three processes campaign; one leads at a time,
// and each time the leader is killed with SIGKILL another process leads
// within the lease (1s) plus 300 ms, with a higher term.
func TestElectAmongProcesses(t *testing.T) {
	srv := redistest.Start(t)
	const name = "elect-procs"
	type line struct {
		child int
		text  string
	}
	lines := make(chan line, 16)
	var cmds []*exec.Cmd
	for i := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+srv.Addr, electCampaignMode+"="+name)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		cmds = append(cmds, cmd)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- line{i, sc.Text()}
			}
		}()
	}
	next := func(within time.Duration) line {
		t.Helper()
		select {
		case l := <-lines:
			return l
		case <-time.After(within):
			t.Fatalf("no child said anything within %v", within)
		}
		return line{}
	}
	campaigning := 0
	var leader line
	for campaigning < 3 || leader.text == "" {
		l := next(waitFor)
		switch {
		case l.text == "campaigning":
			campaigning++
		case strings.HasPrefix(l.text, "leads ") && leader.text == "":
			leader = l
		default:
			t.Fatalf("child %d said %q", l.child, l.text)
		}
	}
	var term uint64
	for round := range 2 {
		var got uint64
		fmt.Sscanf(leader.text, "leads %d", &got)
		if got <= term {
			t.Fatalf("round %d: term %d after %d", round, got, term)
		}
		term = got
		// Through the leader's renewals: nobody else leads.
		select {
		case l := <-lines:
			t.Fatalf("round %d: child %d said %q while child %d leads", round, l.child, l.text, leader.child)
		case <-time.After(700 * time.Millisecond):
		}
		if err := cmds[leader.child].Process.Kill(); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		l := next(waitFor)
		took := time.Since(killed)
		if !strings.HasPrefix(l.text, "leads ") || l.child == leader.child {
			t.Fatalf("round %d: child %d said %q after the kill of child %d", round, l.child, l.text, leader.child)
		}
		t.Logf("round %d: child %d leads %v after the SIGKILL of child %d (lease 1s)", round, l.child, took, leader.child)
		if took > time.Second+300*time.Millisecond {
			t.Fatalf("round %d: successor leads %v after the kill, want within lease + 300ms", round, took)
		}
		leader = l
	}
}
