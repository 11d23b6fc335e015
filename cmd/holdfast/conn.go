package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redisurl"
)

const defaultRedis = "redis://127.0.0.1:6379"

// connHelp is the part of every command's help that says how to name Redis.
const connHelp = `Redis: --redis URL, else $HOLDFAST_REDIS, else ` + defaultRedis + `. URL forms:
` + redisurl.Forms + `  Passwords are never printed; prefer $HOLDFAST_REDIS to --redis, which ps shows.
`

// target is a parsed --redis: the rueidis options and a form safe to print.
type target struct {
	opt     rueidis.ClientOption
	display string // the URL with its password replaced by "xxxxx"
	layout  holdfast.Layout
}

// layoutHelp documents --layout for every command that takes it.
const layoutHelp = `Layout: --layout redisson, else $HOLDFAST_LAYOUT, else holdfast: speak Redisson's
lock keys and messages, to see, free or take a lock Java services hold with Redisson.
`

// parseLayout resolves --layout: the flag, else $HOLDFAST_LAYOUT, else holdfast.
func parseLayout(flagValue string) (holdfast.Layout, error) {
	s := flagValue
	if s == "" {
		s = os.Getenv("HOLDFAST_LAYOUT")
	}
	l, err := holdfast.ParseLayout(s)
	if err != nil {
		return 0, usageError{err.Error()}
	}
	return l, nil
}

// parseRedis parses a --redis value with the URL syntax holdfast.Open
// takes (package redisurl). Its errors never contain the password, nor any
// part of a malformed URL that could be one.
func parseRedis(flagValue string) (target, error) {
	s := flagValue
	if s == "" {
		s = os.Getenv("HOLDFAST_REDIS")
	}
	if s == "" {
		s = defaultRedis
	}
	t, err := redisurl.Parse(s)
	if err != nil {
		return target{}, usageError{"--redis " + err.Error() + " (see `holdfast help`)"}
	}
	for _, s := range t.Secrets {
		addSecret(s)
	}
	return target{opt: t.Option, display: t.Display}, nil
}

// connect dials Redis and checks that it answers as the user given.
func connect(t target) (rueidis.Client, error) {
	rdb, err := rueidis.NewClient(t.opt)
	if err != nil {
		return nil, redisFailure(fmt.Sprintf("cannot use Redis at %s", t.display), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Do(ctx, rdb.B().Ping().Build()).Error(); err != nil {
		rdb.Close()
		return nil, redisFailure(fmt.Sprintf("cannot use Redis at %s", t.display), err)
	}
	return rdb, nil
}

// secrets are the strings no output of holdfast may contain; see redact.
var secrets []string

func addSecret(s string) {
	if s != "" {
		secrets = append(secrets, s)
	}
}

// redact replaces every secret in msg. Errors are built from the redacted URL
// already; this is the second line of defence, for a library or server
// message that quotes its input.
func redact(msg string) string {
	for _, s := range secrets {
		msg = strings.ReplaceAll(msg, s, "xxxxx")
	}
	return msg
}

// codedError carries the exit code holdfast ends with.
type codedError struct {
	code int
	err  error
}

func (e codedError) Error() string { return e.err.Error() }
func (e codedError) Unwrap() error { return e.err }

// redisFailure wraps a failed Redis interaction with what was being done and
// the exit code of its class.
func redisFailure(doing string, err error) error {
	return codedError{code: exitCodeOf(err), err: fmt.Errorf("%s: %w", doing, err)}
}

// exitCodeOf classes a Redis failure: exitUnreachable when no server answered,
// exitNoPerm when the server refused the user (authentication or ACL), 1
// otherwise. The server's reply travels wrapped (as a *rueidis.RedisError)
// inside the library's errors, holdfast.ErrRedis included: the permission
// class is a subset of ErrRedis, told apart by the reply's code.
func exitCodeOf(err error) int {
	var re *rueidis.RedisError
	if errors.As(err, &re) {
		if deniedReply(re.Error()) {
			return exitNoPerm
		}
		return 1
	}
	// The library may report a Redis failure in its own words; the server's
	// reply text is the stable part.
	msg := err.Error()
	if deniedReply(msg) {
		return exitNoPerm
	}
	if errors.Is(err, rueidis.ErrClosing) || errors.Is(err, context.DeadlineExceeded) || unreachableText(msg) {
		return exitUnreachable
	}
	return 1
}

// deniedReply reports whether msg carries a reply of the permission class:
// the codes of a refused user or command, or the error Redis 7 gives a script
// that calls a command the ACL denies ("ERR The user executing the script
// can't run this command ...", no NOPERM code).
func deniedReply(msg string) bool {
	for _, code := range []string{"NOPERM", "NOAUTH", "WRONGPASS"} {
		if strings.HasPrefix(msg, code) || strings.Contains(msg, ": "+code) || strings.Contains(msg, " "+code+" ") {
			return true
		}
	}
	return strings.Contains(msg, "The user executing the script can't run this command")
}

func unreachableText(msg string) bool {
	for _, s := range []string{"connection refused", "i/o timeout", "no such host", "no route to host",
		"connection reset", "network is unreachable", "broken pipe", "EOF"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
