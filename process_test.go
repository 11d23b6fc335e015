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
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{os.Getenv(childEnv)}, DisableCache: true})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	c, err := holdfast.New(holdfast.Config{Redis: rdb, WatchdogTimeout: time.Second})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	l := c.Lock(context.Background(), "crash")
	if err := l.Wait(context.Background()); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("held")
	<-l.Lost
	fmt.Println("lost", l.Err())
	os.Exit(1)
}

func TestHolderKilledWithSIGKILL(t *testing.T) {
	srv := redistest.Start(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+srv.Addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "held" {
		t.Fatalf("child said %q, %v", line, err)
	}
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
