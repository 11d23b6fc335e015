// Command holdfast is the command-line tool of the holdfast lock library.
//
//	holdfast demo   [--redis ADDR]
//	holdfast exec   [--redis ADDR] [-w|--wait D] [--lease D | --watchdog D] [--kill-after D] NAME -- CMD [ARGS...]
//	holdfast status [--redis ADDR] [--json] NAME...
//
// The Redis address comes from --redis, else HOLDFAST_REDIS, else
// 127.0.0.1:6379 (demo without an address runs an embedded Redis).
//
// Exit codes: exec exits with CMD's code (128+N when CMD died of signal N);
// 2 for bad usage or an unreachable Redis; 75 when the lock was not acquired
// within --wait; 76 when the lock was lost while CMD ran.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/redis/rueidis"
)

// Exit codes of holdfast itself.
const (
	exitUsage    = 2
	exitNotTaken = 75 // EX_TEMPFAIL: the lock was not acquired within --wait
	exitLost     = 76 // the lock was lost while CMD ran
)

const defaultAddr = "127.0.0.1:6379"

const usage = `usage:
  holdfast demo   [--redis ADDR]
  holdfast exec   [--redis ADDR] [-w|--wait DURATION] [--lease DURATION | --watchdog DURATION]
                  [--kill-after DURATION] NAME -- CMD [ARGS...]
  holdfast status [--redis ADDR] [--json] NAME...

Redis address: --redis, else $HOLDFAST_REDIS, else 127.0.0.1:6379.
exec exit codes: CMD's own; 2 usage or Redis unreachable; 75 not acquired within --wait;
76 lock lost while CMD ran (CMD got SIGTERM, then SIGKILL after --kill-after).
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is bad input on the command line: one line on stderr, exit 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	var code int
	var err error
	switch args[0] {
	case "demo":
		code, err = demoMain(args[1:], stdout)
	case "exec":
		code, err = execMain(args[1:], stderr)
	case "status":
		code, err = statusMain(args[1:], stdout)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		err = usageError{fmt.Sprintf("unknown command %q (want demo, exec or status)", args[0])}
	}
	if err != nil {
		fmt.Fprintf(stderr, "holdfast: %v\n", err)
		if code == 0 {
			code = exitUsage
		}
	}
	return code
}

// newFlagSet returns a flag set that reports errors as usageError.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return usageError{"see `holdfast help`"}
		}
		return usageError{err.Error()}
	}
	return nil
}

func redisAddr(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if env := os.Getenv("HOLDFAST_REDIS"); env != "" {
		return env
	}
	return defaultAddr
}

// connect dials Redis and checks it answers.
func connect(addr string) (rueidis.Client, error) {
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:      []string{addr},
		DisableCache:     true,
		ConnWriteTimeout: 5 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot reach Redis at %s: %v", addr, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Do(ctx, rdb.B().Ping().Build()).Error(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("cannot reach Redis at %s: %v", addr, err)
	}
	return rdb, nil
}
