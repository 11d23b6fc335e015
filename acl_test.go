package holdfast_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
)

// aclRules are the rights holdfast needs, as docs/operations.md states them: the lock
// scripts and the commands they run, on holdfast's keys and channels, plus
// pub/sub, SCAN (Client.Names), GET (Inspect's fence) and the connection
// handshake.
const aclRules = "resetkeys ~holdfast:* resetchannels &holdfast:* -@all " +
	"+evalsha +eval +exists +get +set +del +hget +hmget +hset +hincrby +hdel +hexists +hlen +hgetall +incr +pexpire +pttl +time +publish " +
	"+subscribe +unsubscribe +scan +ping +hello +client|tracking"

// TestDocsStateTheACLRules keeps the documented ACL line and the one the
// tests run as the same.
func TestDocsStateTheACLRules(t *testing.T) {
	doc, err := os.ReadFile("docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "ACL SETUSER holdfast on >PASSWORD "+aclRules+"\n") {
		t.Fatalf("docs/operations.md does not state the ACL rules the tests use:\nACL SETUSER holdfast on >PASSWORD %s", aclRules)
	}
}

// aclClient creates an ACL user with rules on srv and returns a rueidis
// client logged in as that user, with the default client options (client-side
// caching on) so that the handshake's needs are covered too.
func aclClient(t *testing.T, srv *redistest.Server, user, rules string) rueidis.Client {
	t.Helper()
	args := append([]string{"ACL", "SETUSER", user, "reset", "on", ">secret"}, strings.Fields(rules)...)
	srv.Do(t, args...)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, Username: user, Password: "secret"})
	if err != nil {
		t.Fatalf("client as %s: %v", user, err)
	}
	t.Cleanup(c.Close)
	return c
}

// The core path — acquire, reentry, release, watchdog renewal, waiting and
// the pub/sub wake-up — runs as a user with exactly the documented rights.
func TestCorePathWithExactlyTheACLRules(t *testing.T) {
	srv := redistest.Start(t)
	// Long enough for a loaded test machine: the watchdog renews at
	// lease/3, and the test waits two leases.
	const lease = time.Second
	newACLClient := func() *holdfast.Client {
		c, err := holdfast.New(holdfast.Config{Redis: aclClient(t, srv, "holdfast", aclRules), WatchdogTimeout: lease})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b := newACLClient(), newACLClient()
	ctx := holdfast.WithOwner(context.Background(), "job")
	held := a.Lock(ctx, "acl")
	mustAcquire(t, held)
	nested := a.Lock(ctx, "acl")
	mustAcquire(t, nested)
	if nested.Token() != held.Token() {
		t.Fatalf("reentry token %d, outer %d", nested.Token(), held.Token())
	}
	if err := nested.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	waiter := b.Lock(context.Background(), "acl")
	waitSubscribed(t, srv, "acl")
	first := held.Deadline()
	time.Sleep(2 * lease) // the watchdog renews several times meanwhile
	notLost(t, held)
	if !held.Deadline().After(first) {
		t.Fatalf("deadline %v did not move from %v: no renewal", held.Deadline(), first)
	}
	select {
	case <-waiter.Acquired:
		t.Fatal("waiter granted while the lock is held")
	default:
	}
	released := time.Now()
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, waiter)
	if woke := time.Since(released); woke > lease/2 {
		t.Fatalf("waiter woke %v after the release, not by pub/sub", woke)
	}
	if waiter.Token() <= held.Token() {
		t.Fatalf("token %d after %d", waiter.Token(), held.Token())
	}

	// The operator calls, with the same rights.
	info, err := a.Inspect(context.Background(), "acl")
	if err != nil || len(info.Holders) != 1 || info.Fence != waiter.Token() {
		t.Fatalf("Inspect: %+v, %v", info, err)
	}
	if names, err := a.Names(context.Background(), "acl*"); err != nil || len(names) != 1 || names[0] != "acl" {
		t.Fatalf("Names: %v, %v", names, err)
	}
	if err := a.ForceUnlock(context.Background(), "acl"); err != nil {
		t.Fatalf("ForceUnlock: %v", err)
	}
	mustLose(t, waiter, holdfast.ErrNotOwner) // at its next renewal

	// The fair lock, with the same rights.
	fair := a.FairLock(context.Background(), "acl-fair")
	mustAcquire(t, fair)
	fairWaiter := b.FairLock(context.Background(), "acl-fair")
	time.Sleep(lease / 3) // queued in Redis, keeping its place alive
	if err := fair.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, fairWaiter)
	if err := fairWaiter.Release(context.Background()); err != nil {
		t.Fatal(err)
	}

	// The read-write lock: readers share, a writer waits for them.
	r1, r2 := a.ReadLock(context.Background(), "acl-rw"), b.ReadLock(context.Background(), "acl-rw")
	mustAcquire(t, r1)
	mustAcquire(t, r2)
	writer := a.WriteLock(context.Background(), "acl-rw")
	for _, r := range []*holdfast.Lock{r1, r2} {
		if err := r.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	mustAcquire(t, writer)
	if err := writer.Release(context.Background()); err != nil {
		t.Fatal(err)
	}

	// The semaphore: two permits, a third holder waits for a release.
	s1, s2 := a.Semaphore(context.Background(), "acl-sem", 2), b.Semaphore(context.Background(), "acl-sem", 2)
	mustAcquire(t, s1)
	mustAcquire(t, s2)
	s3 := b.Semaphore(context.Background(), "acl-sem", 2)
	if err := s1.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, s3)
	if info, err := a.Inspect(context.Background(), "acl-sem"); err != nil || info.Permits != 2 {
		t.Fatalf("Inspect of a semaphore as the ACL user: %+v, %v", info, err)
	}
	if err := a.ForceUnlock(context.Background(), "acl-sem"); err != nil {
		t.Fatal(err)
	}
	s2.Release(context.Background())
	s3.Release(context.Background())
	noLockKeys(t, srv)
}

// A user without the rights holdfast needs sees the server's refusal at
// once, not a wait that looks like contention.
func TestMissingACLRightsEndTheLockAtOnce(t *testing.T) {
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name, rules, want string
	}{
		{"no scripts", strings.NewReplacer("+evalsha ", "", "+eval ", "").Replace(aclRules), "'evalsha'"},
		{"no string writes", strings.Replace(aclRules, "+set ", "", 1), "can't run this command"},
		{"other keys", strings.Replace(aclRules, "~holdfast:*", "~app:*", 1), "NOPERM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &records{}
			c, err := holdfast.New(holdfast.Config{Redis: aclClient(t, srv, "limited", tc.rules), Logger: slog.New(logs)})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			l := c.Lock(context.Background(), "denied") // no WithWait: would wait forever if retried
			select {
			case <-l.Lost:
			case <-time.After(time.Second):
				t.Fatal("Lock still pending after 1s: the refusal was retried")
			}
			err = l.Err()
			if !errors.Is(err, holdfast.ErrRedis) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Lock ended with %v, want ErrRedis with %q", err, tc.want)
			}
			t.Logf("ended after %v: %v", time.Since(start).Round(time.Millisecond), err)
			if a, ok := logs.find(slog.LevelWarn, "refused"); !ok || a["name"] != "denied" || !strings.Contains(a["cause"], tc.want) {
				t.Fatalf("Warn log %v (found %v), want the name and the refusal", a, ok)
			}
		})
	}
}
