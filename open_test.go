package holdfast_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/internal/topology"
	"github.com/holdfast/holdfast/scripts"
)

// open is holdfast.Open that fails the test on an error and closes the
// Client when the test ends.
func open(t *testing.T, url string) *holdfast.Client {
	t.Helper()
	c, err := holdfast.Open(url, holdfast.Config{})
	if err != nil {
		t.Fatalf("Open(%q): %v", url, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// lockOnce takes name and releases it, and returns its token.
func lockOnce(t *testing.T, c *holdfast.Client, name string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	l := c.Lock(ctx, name)
	if err := l.Wait(ctx); err != nil {
		t.Fatalf("Lock(%q): %v", name, err)
	}
	tok := l.Token()
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release(%q): %v", name, err)
	}
	return tok
}

// A Client from Open locks, and its Close closes the rueidis client it
// dialled.
func TestOpenOwnsItsRedisClient(t *testing.T) {
	srv := redistest.Start(t)
	for i, url := range []string{"redis://" + srv.Addr, srv.Addr} {
		c, err := holdfast.Open(url, holdfast.Config{ClientID: "opened"})
		if err != nil {
			t.Fatalf("Open(%q): %v", url, err)
		}
		if tok := lockOnce(t, c, "orders:42"); tok != uint64(i+1) {
			t.Errorf("Open(%q): token %d, want %d", url, tok, i+1)
		}
		rc := holdfast.RedisOf(c)
		ctx := context.Background()
		if err := rc.Do(ctx, rc.B().Ping().Build()).Error(); err != nil {
			t.Fatalf("PING before Close: %v", err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := rc.Do(ctx, rc.B().Ping().Build()).Error(); !errors.Is(err, rueidis.ErrClosing) {
			t.Fatalf("PING on the dialled client after Close: %v, want rueidis.ErrClosing", err)
		}
	}
}

// Open logs in as an ACL user with exactly the documented rights (client-side
// caching is off, so it needs no CLIENT TRACKING), and no error of a
// refused login shows the password.
func TestOpenACLUser(t *testing.T) {
	srv := redistest.Start(t)
	const password = "Open-Sesame-31"
	srv.Do(t, append([]string{"ACL", "SETUSER", "holdfast", "reset", "on", ">" + password},
		strings.Fields(strings.ReplaceAll(aclRules, " +client|tracking", ""))...)...)
	srv.Do(t, "ACL", "SETUSER", "default", "off")

	c := open(t, "redis://holdfast:"+password+"@"+srv.Addr)
	lockOnce(t, c, "orders:42")
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	r := c.ReadLock(ctx, "catalog")
	if err := r.Wait(ctx); err != nil {
		t.Fatalf("ReadLock as the ACL user: %v", err)
	}
	r.Release(ctx)

	for _, tc := range []struct {
		url, secret, reply string
	}{
		{"redis://holdfast:Wrong-Secret-99@" + srv.Addr, "Wrong-Secret-99", "WRONGPASS"},
		{"redis://:Wrong-Secret-99@" + srv.Addr, "Wrong-Secret-99", "WRONGPASS"}, // the default user, off
		{"redis://holdfast:Wrong%2FSecret%2399@" + srv.Addr, "Secret", "WRONGPASS"},
		{"redis://" + srv.Addr, "", "NOAUTH"},
	} {
		c, err := holdfast.Open(tc.url, holdfast.Config{})
		if err == nil {
			c.Close()
			t.Errorf("Open(%q) succeeded", tc.url)
			continue
		}
		var re *rueidis.RedisError
		if !errors.As(err, &re) || !strings.HasPrefix(re.Error(), tc.reply) {
			t.Errorf("Open(%q): %v, want a %s reply from the server", tc.url, err, tc.reply)
		}
		if tc.secret != "" && strings.Contains(err.Error(), tc.secret) {
			t.Errorf("Open(%q): the error shows the password: %v", tc.url, err)
		}
		if errors.Is(err, holdfast.ErrInvalidOption) {
			t.Errorf("Open(%q): a refused login is not a bad option: %v", tc.url, err)
		}
		t.Logf("%s -> %v", tc.url, err)
	}
}

// Bad input ends Open before anything is dialled, with ErrInvalidOption and
// no password in the error; an unreachable Redis is told apart from it.
func TestOpenRefuses(t *testing.T) {
	srv := redistest.Start(t)
	accepted := connections(t, srv)
	for _, tc := range []struct {
		what, url string
		cfg       holdfast.Config
		says      string
	}{
		{"Config.Redis with a URL", "redis://" + srv.Addr, holdfast.Config{Redis: srv.Client(t)}, "Config.Redis must be nil"},
		{"a malformed URL", "redis://ops:Wrong/Secret#99@" + srv.Addr, holdfast.Config{}, "malformed URL"},
		{"a bad path", "redis://ops:Secret-99@" + srv.Addr + "/x/y", holdfast.Config{}, "invalid URL path"},
		{"another scheme", "http://ops:Secret-99@" + srv.Addr, holdfast.Config{}, "invalid URL scheme"},
		{"sentinel_password without master_set", "redis://" + srv.Addr + "?sentinel_password=Secret-99", holdfast.Config{}, "need master_set"},
		{"an empty URL", "", holdfast.Config{}, "no Redis URL"},
		{"a bad Config", "redis://" + srv.Addr, holdfast.Config{WatchdogTimeout: time.Millisecond}, "WatchdogTimeout"},
	} {
		before := accepted()
		c, err := holdfast.Open(tc.url, tc.cfg)
		if err == nil {
			c.Close()
			t.Errorf("%s: Open succeeded", tc.what)
			continue
		}
		if !errors.Is(err, holdfast.ErrInvalidOption) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v; want ErrInvalidOption saying %q", tc.what, err, tc.says)
		}
		if strings.Contains(err.Error(), "Secret") {
			t.Errorf("%s: the error shows the password: %v", tc.what, err)
		}
		if after := accepted(); after != before {
			t.Errorf("%s: %s connections accepted before Open, %s after: it dialled", tc.what, before, after)
		}
		t.Logf("%s -> %v", tc.what, err)
	}

	dead := redistest.FreeAddr(t)
	_, err := holdfast.Open("redis://ops:Secret-99@"+dead, holdfast.Config{})
	if err == nil || errors.Is(err, holdfast.ErrInvalidOption) || !strings.Contains(err.Error(), "connection refused") ||
		!strings.Contains(err.Error(), dead) || strings.Contains(err.Error(), "Secret") {
		t.Fatalf("Open on a dead address: %v; want connection refused at %s, without the password", err, dead)
	}
	t.Logf("dead address -> %v", err)
}

// connections returns a function that reports how many connections srv
// has accepted so far, asking through one connection of its own.
func connections(t *testing.T, srv *redistest.Server) func() string {
	rc := srv.Client(t)
	return func() string {
		t.Helper()
		info, err := rc.Do(context.Background(), rc.B().Info().Section("stats").Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_connections_received:"); ok {
				return v
			}
		}
		t.Fatalf("INFO stats has no total_connections_received:\n%s", info)
		return ""
	}
}

// Several addr= seed a cluster client (here the one node of a cluster that
// owns every slot, twice over).
func TestOpenCluster(t *testing.T) {
	node := topology.StartNode(t, "--cluster-enabled", "yes", "--save", "", "--appendonly", "no")
	if _, err := node.Do("CLUSTER", "ADDSLOTSRANGE", "0", "16383"); err != nil {
		t.Fatal(err)
	}
	topology.Eventually(t, 20*time.Second, "cluster_state:ok", func() bool {
		info, err := node.MustDo("CLUSTER", "INFO").ToString()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	})
	c := open(t, "redis://"+node.Addr+"?addr="+node.Addr)
	if mode := holdfast.RedisOf(c).Mode(); mode != rueidis.ClientModeCluster {
		t.Fatalf("client mode %v, want cluster", mode)
	}
	for i := uint64(1); i <= 2; i++ {
		if tok := lockOnce(t, c, "job"); tok != i {
			t.Fatalf("token %d, want %d", tok, i)
		}
	}
}

// master_set reaches the primary through a Sentinel.
func TestOpenSentinel(t *testing.T) {
	srv := redistest.Start(t)
	conf := filepath.Join(t.TempDir(), "sentinel.conf")
	if err := os.WriteFile(conf, []byte("sentinel monitor jobs 127.0.0.1 "+portOf(srv)+" 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sentinel := topology.StartNode(t, conf, "--sentinel")
	c := open(t, "redis://"+sentinel.Addr+"?master_set=jobs")
	if mode := holdfast.RedisOf(c).Mode(); mode != rueidis.ClientModeSentinel {
		t.Fatalf("client mode %v, want sentinel", mode)
	}
	lockOnce(t, c, "nightly")
	if fence, err := srv.Do(t, "GET", scripts.FenceKey("nightly")).AsInt64(); err != nil || fence != 1 {
		t.Fatalf("the primary's fence is %d (%v) after a lock through the Sentinel, want 1", fence, err)
	}
}

func portOf(srv *redistest.Server) string {
	_, port, _ := strings.Cut(srv.Addr, ":")
	return port
}
