package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/scripts"
)

const execHelp = `usage: holdfast exec [OPTIONS] NAME [OPTIONS] -- CMD [ARGS...]

Acquire lock NAME, run CMD while holding it, release it when CMD exits: a
distributed flock(1). CMD gets HOLDFAST_LOCK=NAME and HOLDFAST_TOKEN=its fencing token.
With --elect VALUE, run CMD while this process leads election NAME, and resign when
CMD exits.

Options (before or after NAME, before --):
  --redis URL          Redis to use (see below)
  --layout L           holdfast (default) or redisson (see below)
  -w, --wait SECONDS   give up if not acquired within this long (exit 75); a plain
                       number is seconds (flock's -w), or a duration: 500ms, 2m.
                       Default: wait as long as it takes
  --lease DURATION     fixed lease, never renewed: the lock ends after it
  --watchdog DURATION  watchdog lease, renewed every third of it while CMD runs
                       (default 30s; not with --lease)
  --fair               take NAME as a fair lock: granted in request order across
                       processes (every user of NAME must say --fair)
  --read, --write      take NAME as a read-write lock: many --read holders at once,
                       or one --write holder (like flock's -s and -x)
  --permits N          take one of N permits of NAME as a semaphore: at most N
                       holders at once (every user of NAME must say --permits N)
  --elect VALUE        campaign for the leadership of election NAME, announcing
                       VALUE (an address, a host name): CMD runs while this process
                       leads, with its term as HOLDFAST_TOKEN; holdfast leader NAME
                       shows VALUE. Losing the leadership stops CMD (exit 76)
  --kill-after DURATION
                       when the lock is lost, CMD's process group gets SIGTERM, then
                       SIGKILL this long after (default 10s)

CMD runs in its own process group. SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and
SIGUSR2 sent to holdfast are passed on to the whole group. When the lock is lost the
group is stopped and exec exits 76; it exits 76 too when CMD ended first and the
release finds the lock no longer held (a force-unlock that no renewal had seen).
When Redis does not confirm the release (it is down, or silent past a call's
timeout), exec says so on stderr, exits with CMD's status without waiting, and
the lock stays taken until its lease runs out.
On Linux CMD is killed (SIGKILL) if holdfast dies, even by SIGKILL; its own
children are not, unless they too ask to die with their parent. Elsewhere a
killed holdfast leaves CMD running until its lease runs out: stop holdfast with
SIGTERM, which stops CMD first.
` + "\n" + layoutHelp

// execOptions are exec's command line, checked before Redis is dialled.
type execOptions struct {
	target    target
	name      string
	argv      []string
	lockOpts  []holdfast.Option
	kind      string        // "", "fair", "read", "write", "semaphore" or "elect"
	permits   int           // for "semaphore"
	value     string        // for "elect": what the leader announces
	wait      time.Duration // -1: no limit
	watchdog  time.Duration
	killAfter time.Duration
}

func parseExec(args []string) (execOptions, error) {
	o := execOptions{wait: -1}
	fs := newFlagSet("exec")
	addr := fs.String("redis", "", "")
	layout := fs.String("layout", "", "")
	fs.Func("w", "", waitFlag(&o.wait))
	fs.Func("wait", "", waitFlag(&o.wait))
	lease := fs.Duration("lease", 0, "")
	fs.DurationVar(&o.watchdog, "watchdog", holdfast.DefaultWatchdogTimeout, "")
	fs.DurationVar(&o.killAfter, "kill-after", 10*time.Second, "")
	var fair, read, write bool
	fs.BoolVar(&fair, "fair", false, "")
	fs.BoolVar(&read, "read", false, "")
	fs.BoolVar(&write, "write", false, "")
	fs.IntVar(&o.permits, "permits", 0, "")
	fs.StringVar(&o.value, "elect", "", "")

	before, cmd, found := splitDashes(args)
	rest, err := parseArgs(fs, before)
	if err != nil {
		return o, err
	}
	switch {
	case len(rest) == 0:
		return o, usageError{"exec: missing NAME (usage: holdfast exec [OPTIONS] NAME -- CMD [ARGS...])"}
	case len(rest) > 1:
		return o, usageError{fmt.Sprintf("exec: unexpected %q after NAME %q: put `--` before CMD", rest[1], rest[0])}
	case !found:
		return o, usageError{"exec: missing `--` between NAME and CMD"}
	case len(cmd) == 0:
		return o, usageError{"exec: missing CMD after `--`"}
	}
	o.name, o.argv = rest[0], cmd
	if err := scripts.ValidateName(o.name); err != nil {
		return o, usageError{"exec: " + err.Error()}
	}
	leaseSet, watchdogSet, permitsSet, electSet := false, false, false, false
	fs.Visit(func(f *flag.Flag) {
		leaseSet = leaseSet || f.Name == "lease"
		watchdogSet = watchdogSet || f.Name == "watchdog"
		permitsSet = permitsSet || f.Name == "permits"
		electSet = electSet || f.Name == "elect"
	})
	if electSet {
		if err := scripts.ValidateValue(o.value); err != nil {
			return o, usageError{"exec: --elect: " + err.Error()}
		}
	}
	if permitsSet && o.permits < 1 {
		return o, usageError{fmt.Sprintf("exec: --permits %d: a semaphore needs at least 1 permit", o.permits)}
	}
	switch {
	case leaseSet && watchdogSet:
		return o, usageError{"exec: --lease and --watchdog exclude each other"}
	case leaseSet && *lease < holdfast.MinLease:
		return o, usageError{fmt.Sprintf("exec: --lease %v is shorter than %v", *lease, holdfast.MinLease)}
	case o.watchdog < holdfast.MinLease:
		return o, usageError{fmt.Sprintf("exec: --watchdog %v is shorter than %v", o.watchdog, holdfast.MinLease)}
	case o.killAfter <= 0:
		return o, usageError{"exec: --kill-after must be positive"}
	}
	for _, k := range []struct {
		set  bool
		kind string
	}{{fair, "fair"}, {read, "read"}, {write, "write"}, {permitsSet, "permits"}, {electSet, "elect"}} {
		if k.set && o.kind != "" {
			return o, usageError{fmt.Sprintf("exec: --%s and --%s exclude each other", o.kind, k.kind)}
		}
		if k.set {
			o.kind = k.kind
		}
	}
	if o.kind == "permits" {
		o.kind = "semaphore"
	}
	if o.wait >= 0 {
		o.lockOpts = append(o.lockOpts, holdfast.WithWait(o.wait))
	}
	if leaseSet {
		o.lockOpts = append(o.lockOpts, holdfast.WithLease(*lease))
	}
	if o.target, err = parseRedis(*addr); err != nil {
		return o, err
	}
	o.target.layout, err = parseLayout(*layout)
	if err == nil && o.target.layout == holdfast.LayoutRedisson && o.kind == "elect" {
		err = usageError{fmt.Sprintf("exec: --%s is not supported with --layout redisson", o.kind)}
	}
	return o, err
}

// what names what exec holds, for its messages: lock "NAME", or the
// leadership of "NAME".
func (o execOptions) what() string {
	if o.kind == "elect" {
		return "leadership of " + strconv.Quote(o.name)
	}
	return "lock " + strconv.Quote(o.name)
}

// splitDashes splits args at the first "--": holdfast's part and CMD.
func splitDashes(args []string) (before, after []string, found bool) {
	for i, a := range args {
		if a == "--" {
			return args[:i], args[i+1:], true
		}
	}
	return args, nil, false
}

// waitFlag parses -w as flock does (a number of seconds, fractions allowed),
// or as a Go duration.
func waitFlag(dst *time.Duration) func(string) error {
	return func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil {
			secs, ferr := strconv.ParseFloat(s, 64)
			if ferr != nil || secs != secs || secs > float64(1<<62)/1e9 {
				return fmt.Errorf("%q is neither seconds nor a duration like 500ms", s)
			}
			d = time.Duration(secs * float64(time.Second))
		}
		if d < 0 {
			return errors.New("negative wait")
		}
		*dst = d
		return nil
	}
}

// execMain is `holdfast exec`: a distributed flock. It acquires NAME, runs
// CMD while holding it and releases it when CMD exits.
func execMain(args []string, _, stderr io.Writer) (int, error) {
	o, err := parseExec(args)
	if err != nil {
		return 0, err
	}
	rdb, err := connect(o.target)
	if err != nil {
		return 0, err
	}
	defer rdb.Close()
	c, err := holdfast.New(holdfast.Config{Redis: rdb, WatchdogTimeout: o.watchdog, Layout: o.target.layout})
	if err != nil {
		return exitUsage, err
	}
	defer c.Close()
	// One read of NAME's keys through a script finds a user without the
	// rights a lock needs now, rather than after a silent wait.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err = c.Inspect(ctx, o.name)
	cancel()
	if err != nil {
		return 0, redisFailure("cannot use lock "+strconv.Quote(o.name), err)
	}

	signals := make(chan os.Signal, 8)
	signal.Notify(signals, forwarded...)
	defer signal.Stop(signals)

	lock := map[string]func(context.Context, string, ...holdfast.Option) *holdfast.Lock{
		"": c.Lock, "fair": c.FairLock, "read": c.ReadLock, "write": c.WriteLock,
		"semaphore": func(ctx context.Context, name string, opts ...holdfast.Option) *holdfast.Lock {
			return c.Semaphore(ctx, name, o.permits, opts...)
		},
		"elect": func(ctx context.Context, name string, opts ...holdfast.Option) *holdfast.Lock {
			return c.Elect(ctx, name, o.value, opts...)
		},
	}[o.kind]
	l := lock(context.Background(), o.name, o.lockOpts...)
	select {
	case <-l.Acquired:
	case <-l.Lost:
		return acquireFailure(o, l.Err(), func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			for {
				err := rdb.Do(ctx, rdb.B().Ping().Build()).Error()
				// rueidis shares a dial among the callers that need the
				// connection, under the first one's context: a dial that
				// someone else cancelled says nothing about the server.
				if err == nil || !errors.Is(err, context.Canceled) || ctx.Err() != nil {
					return err
				}
			}
		})
	case sig := <-signals:
		l.Release(context.Background())
		return 128 + int(sig.(syscall.Signal)), fmt.Errorf("interrupted by %v while waiting for %q", sig, o.name)
	}
	defer l.Release(context.Background())

	cmd := exec.Command(o.argv[0], o.argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(),
		"HOLDFAST_TOKEN="+strconv.FormatUint(l.Token(), 10),
		"HOLDFAST_LOCK="+o.name)
	var restoreTerminal func()
	cmd.SysProcAttr, restoreTerminal = childAttr()
	started := make(chan error, 1) // closer: none, one send by the starter below
	exited := make(chan error, 1)  // closer: none, one send by the starter below
	go func() {
		// Linux sends the parent-death signal when the thread that started
		// the child ends, not the process: keep this thread until CMD is
		// reaped.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		restoreTerminal()
		return 127, fmt.Errorf("exec: %v", err)
	}

	lostCh := l.Lost
	var kill <-chan time.Time
	lost := false
	for {
		select {
		case err := <-exited:
			restoreTerminal()
			code := exitCode(cmd, err)
			if lost {
				// Whatever CMD left behind must not run on without the lock.
				signalGroup(cmd, syscall.SIGKILL)
				return exitLost, fmt.Errorf("%s lost while the command ran (%s); command stopped, its exit status was %d", o.what(), message(l.Err()), code)
			}
			rerr := l.Release(context.Background())
			if lostBy(rerr) {
				// The hold ended before CMD did, and no renewal had
				// noticed yet (a force-unlock, an expired lease): CMD
				// ran part of its time without the lock.
				return exitLost, fmt.Errorf("%s lost while the command ran (%s); the command had exited with status %d", o.what(), message(rerr), code)
			}
			switch {
			case errors.Is(rerr, holdfast.ErrReleaseUnconfirmed):
				// Redis is down or silent: exec does not wait a lease for
				// it, and says the name stays taken meanwhile.
				cause := strings.TrimPrefix(message(rerr), message(holdfast.ErrReleaseUnconfirmed)+": ")
				fmt.Fprintf(stderr, "holdfast: release of %q not confirmed by Redis (%s); the lock stays taken until its lease runs out\n", o.name, cause)
			case rerr != nil:
				fmt.Fprintf(stderr, "holdfast: releasing %q: %s\n", o.name, message(rerr))
			}
			return code, nil
		case <-lostCh:
			lostCh = nil
			lost = true
			fmt.Fprintf(stderr, "holdfast: %s lost (%s): sending SIGTERM to the command\n", o.what(), message(l.Err()))
			signalGroup(cmd, syscall.SIGTERM)
			kill = time.After(o.killAfter)
		case <-kill:
			fmt.Fprintf(stderr, "holdfast: command still running %v after SIGTERM: sending SIGKILL\n", o.killAfter)
			signalGroup(cmd, syscall.SIGKILL)
		case sig := <-signals:
			signalGroup(cmd, sig.(syscall.Signal))
		}
	}
}

// lostBy reports whether the final Release found the hold already over:
// Redis no longer shows this owner (ErrNotOwner), or the Lock had ended
// before the Release (ErrNotHeld, wrapping its cause). Only Release ends
// exec's Lock on purpose, so either means the hold was lost while CMD ran.
// A Release that could not reach Redis proves nothing and is not a loss.
func lostBy(releaseErr error) bool {
	return errors.Is(releaseErr, holdfast.ErrNotOwner) || errors.Is(releaseErr, holdfast.ErrNotHeld)
}

// acquireFailure is exec's answer to a Lock that ended before it was held.
// A Redis failure behind it outranks a spent wait budget: "Redis is down"
// must not read as "the lock is busy". A waiter that sleeps until it is
// woken may have made no call since Redis went away, so a spent budget is
// checked with ping.
func acquireFailure(o execOptions, err error, ping func() error) (int, error) {
	switch code := exitCodeOf(err); {
	case code == exitUnreachable || code == exitNoPerm:
		return code, fmt.Errorf("lock %q: %w", o.name, err)
	case errors.Is(err, holdfast.ErrWaitTimeout):
		if perr := ping(); perr != nil && exitCodeOf(perr) == exitUnreachable {
			return exitUnreachable, fmt.Errorf("lock %q not acquired within %v: Redis at %s is unreachable: %w", o.name, o.wait, o.target.display, perr)
		}
		return exitNotTaken, fmt.Errorf("lock %q not acquired within %v", o.name, o.wait)
	case errors.Is(err, holdfast.ErrInvalidName) || errors.Is(err, holdfast.ErrInvalidOption) || errors.Is(err, holdfast.ErrInvalidValue):
		return exitUsage, err
	case errors.Is(err, holdfast.ErrWrongKind):
		return exitFailure, fmt.Errorf("lock %q is in use as another kind of lock (see --fair, --read, --write, --permits, --elect): %w", o.name, err)
	case errors.Is(err, holdfast.ErrPermits):
		return exitFailure, permitsMismatch(o, err)
	}
	return exitFailure, fmt.Errorf("lock %q: %w", o.name, err)
}

// permitsMismatch says in one sentence that NAME's holders use another
// permit count: the count Redis reported when the error carries it.
func permitsMismatch(o execOptions, err error) error {
	var has int
	detail := strings.TrimPrefix(err.Error(), holdfast.ErrPermits.Error()+": ")
	if n, serr := fmt.Sscanf(detail, "it has %d permits", &has); serr == nil && n == 1 {
		return fmt.Errorf("semaphore %q has %d permits, not --permits %d: every user of a name must give the same --permits", o.name, has, o.permits)
	}
	return fmt.Errorf("semaphore %q is in use with another permit count than --permits %d: every user of a name must give the same --permits", o.name, o.permits)
}

// exitCode maps CMD's end to holdfast's exit code: its own code, or 128+N
// when it died of signal N.
func exitCode(cmd *exec.Cmd, err error) int {
	if err == nil {
		return 0
	}
	if cmd.ProcessState == nil {
		return exitFailure
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}
