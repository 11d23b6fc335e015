package holdfast_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
)

// childEnv makes the test binary act as a lock-holding process (see TestMain).
const childEnv = "HOLDFAST_TEST_CHILD_REDIS"

// runChild acquires the lock "crash" with a 1s watchdog lease, prints "held",
// and holds until it is killed.
func runChild() {
	if os.Getenv(fairChildMode) != "" {
		runFairChild()
		return
	}
	if os.Getenv(semChildMode) != "" {
		runSemChild()
		return
	}
	if os.Getenv(electChildMode) != "" || os.Getenv(electCampaignMode) != "" {
		runElectChild()
		return
	}
	c := childClient(holdfast.Config{WatchdogTimeout: time.Second})
	holdUntilKilled(c.Lock(context.Background(), "crash"))
}

// childClient is the Client of a child process, on the test's server.
func childClient(cfg holdfast.Config) *holdfast.Client {
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{os.Getenv(childEnv)}, DisableCache: true})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	cfg.Redis = rdb
	c, err := holdfast.New(cfg)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	return c
}

// holdUntilKilled waits for l, prints "held" and holds until the process
// is killed (or says how the hold ended).
func holdUntilKilled(l *holdfast.Lock) {
	if err := l.Wait(context.Background()); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("held")
	<-l.Lost
	fmt.Println("lost", l.Err())
	os.Exit(1)
}

// startChild runs the test binary as a child process with env added (see
// TestMain), waits for its first line to be said, and kills it when the
// test ends.
func startChild(t *testing.T, said string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || strings.TrimSpace(line) != said {
		t.Fatalf("child said %q, %v; want %q", line, err, said)
	}
	return cmd
}

func TestHolderKilledWithSIGKILL(t *testing.T) {
	srv := redistest.Start(t)
	cmd := startChild(t, "held", childEnv+"="+srv.Addr)
	// Let the watchdog renew at least twice, then kill it without warning.
	time.Sleep(1500 * time.Millisecond)
	c := newClient(t, srv, holdfast.Config{})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	l := c.Lock(context.Background(), "crash")
	mustAcquire(t, l)
	took := time.Since(killed)
	t.Logf("acquired %v after SIGKILL of the holder (lease 1s)", took)
	if took > time.Second+time.Second/2 {
		t.Fatalf("acquired %v after the kill, more than lease + margin", took)
	}
	l.Release(context.Background())
}
