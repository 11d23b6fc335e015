package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/holdfast/holdfast"
)

// execMain is `holdfast exec`: a distributed flock(1). It acquires NAME,
// runs CMD while holding it and releases it when CMD exits.
func execMain(args []string, stderr io.Writer) (int, error) {
	fs := newFlagSet("exec")
	addr := fs.String("redis", "", "Redis address")
	var wait time.Duration = -1
	fs.Func("w", "give up if not acquired within `DURATION`", durationFlag(&wait))
	fs.Func("wait", "give up if not acquired within `DURATION`", durationFlag(&wait))
	lease := fs.Duration("lease", 0, "fixed lease, no watchdog renewal")
	watchdog := fs.Duration("watchdog", holdfast.DefaultWatchdogTimeout, "watchdog lease, renewed every third of it (without --lease)")
	killAfter := fs.Duration("kill-after", 10*time.Second, "SIGKILL CMD this long after SIGTERM when the lock is lost")
	if err := parseFlags(fs, args); err != nil {
		return exitUsage, err
	}
	rest := fs.Args()
	switch {
	case len(rest) == 0:
		return exitUsage, usageError{"exec: missing NAME -- CMD"}
	case len(rest) < 2 || rest[1] != "--":
		return exitUsage, usageError{"exec: missing `--` between NAME and CMD"}
	case len(rest) < 3:
		return exitUsage, usageError{"exec: missing CMD after `--`"}
	}
	name, argv := rest[0], rest[2:]
	if *killAfter <= 0 {
		return exitUsage, usageError{"exec: --kill-after must be positive"}
	}
	var opts []holdfast.Option
	if wait >= 0 {
		opts = append(opts, holdfast.WithWait(wait))
	}
	if *lease != 0 {
		opts = append(opts, holdfast.WithLease(*lease))
	}

	rdb, err := connect(redisAddr(*addr))
	if err != nil {
		return exitUsage, err
	}
	defer rdb.Close()
	c, err := holdfast.New(holdfast.Config{Redis: rdb, WatchdogTimeout: *watchdog})
	if err != nil {
		return exitUsage, err
	}
	defer c.Close()

	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(signals)

	l := c.Lock(context.Background(), name, opts...)
	select {
	case <-l.Acquired:
	case <-l.Lost:
		if errors.Is(l.Err(), holdfast.ErrWaitTimeout) {
			return exitNotTaken, fmt.Errorf("lock %q not acquired within %v", name, wait)
		}
		if errors.Is(l.Err(), holdfast.ErrInvalidName) || errors.Is(l.Err(), holdfast.ErrInvalidOption) {
			return exitUsage, l.Err()
		}
		return 1, fmt.Errorf("lock %q: %v", name, l.Err())
	case sig := <-signals:
		l.Release(context.Background())
		return 128 + int(sig.(syscall.Signal)), fmt.Errorf("interrupted by %v while waiting for %q", sig, name)
	}
	defer l.Release(context.Background())

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(),
		"HOLDFAST_TOKEN="+strconv.FormatUint(l.Token(), 10),
		"HOLDFAST_LOCK="+name)
	if err := cmd.Start(); err != nil {
		return 127, fmt.Errorf("exec: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	lostCh := l.Lost
	var kill <-chan time.Time
	lost := false
	for {
		select {
		case err := <-exited:
			code := exitCode(cmd, err)
			if lost {
				return exitLost, fmt.Errorf("lock %q lost while the command ran (%v); command stopped, its exit status was %d", name, l.Err(), code)
			}
			if rerr := l.Release(context.Background()); rerr != nil {
				fmt.Fprintf(stderr, "holdfast: releasing %q: %v\n", name, rerr)
			}
			return code, nil
		case <-lostCh:
			lostCh = nil
			lost = true
			fmt.Fprintf(stderr, "holdfast: lock %q lost (%v): sending SIGTERM to the command\n", name, l.Err())
			cmd.Process.Signal(syscall.SIGTERM)
			kill = time.After(*killAfter)
		case <-kill:
			fmt.Fprintf(stderr, "holdfast: command still running %v after SIGTERM: sending SIGKILL\n", *killAfter)
			cmd.Process.Kill()
		case sig := <-signals:
			cmd.Process.Signal(sig)
		}
	}
}

func durationFlag(dst *time.Duration) func(string) error {
	return func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		if d < 0 {
			return errors.New("negative duration")
		}
		*dst = d
		return nil
	}
}

// exitCode maps CMD's end to holdfast's exit code: its own code, or 128+N
// when it died of signal N.
func exitCode(cmd *exec.Cmd, err error) int {
	if err == nil {
		return 0
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	if cmd.ProcessState != nil {
		return cmd.ProcessState.ExitCode()
	}
	return 1
}
