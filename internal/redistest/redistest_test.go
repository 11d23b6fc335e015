package redistest

import (
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// A server whose port another process holds is reported as ErrPortTaken
// at once, not after the 10 s wait for an answer; so is a cluster node
// whose bus port is taken.
func TestLaunchReportsATakenPort(t *testing.T) {
	bin := Binary(t)
	for _, tc := range []struct {
		name string
		args func(port, taken string) []string
	}{
		{"data port", func(_, taken string) []string { return []string{"--port", taken} }},
		{"cluster bus port", func(port, taken string) []string {
			return []string{"--port", port, "--cluster-enabled", "yes", "--cluster-port", taken}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			_, taken, _ := net.SplitHostPort(l.Addr().String())
			addr := FreeAddr(t)
			_, port, _ := net.SplitHostPort(addr)
			if tc.name == "data port" {
				addr = l.Addr().String()
			}
			dir := t.TempDir()
			args := append(tc.args(port, taken), "--bind", "127.0.0.1", "--save", "", "--dir", dir,
				"--logfile", filepath.Join(dir, "redis.log"), "--daemonize", "no", "--protected-mode", "no")
			start := time.Now()
			cmd, err := Launch(bin, args, addr, filepath.Join(dir, "redis.log"))
			if cmd != nil {
				cmd.Process.Kill()
				cmd.Wait()
			}
			if !errors.Is(err, ErrPortTaken) {
				t.Fatalf("Launch on a taken port: %v, want ErrPortTaken", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("ErrPortTaken came after %v: the wait for an answer ran out instead of the log being read", d)
			}
		})
	}
}

// Start moves on to another port when the one it picked was taken before
// the server could bind it.
func TestStartMovesOnFromATakenPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	picks := 0
	pickAddr = func(t testing.TB) string {
		if picks++; picks == 1 {
			return l.Addr().String()
		}
		return FreeAddr(t)
	}
	defer func() { pickAddr = FreeAddr }()
	s := Start(t)
	if picks != 2 || s.Addr == l.Addr().String() {
		t.Fatalf("Start picked %d addresses and runs on %s (the taken one is %s)", picks, s.Addr, l.Addr())
	}
	if pong, err := s.Do(t, "PING").ToString(); err != nil || pong != "PONG" {
		t.Fatalf("PING: %q %v", pong, err)
	}
}
