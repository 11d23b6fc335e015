package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

const defaultRedis = "redis://127.0.0.1:6379"

// connHelp is the part of every command's help that says how to name Redis.
const connHelp = `Redis: --redis URL, else $HOLDFAST_REDIS, else ` + defaultRedis + `. URL forms:
  redis://HOST:PORT                              one server (HOST:PORT alone means the same)
  redis://USER:PASSWORD@HOST:PORT/DB             ACL user and password (":PASSWORD@" for the default user)
  rediss://HOST:PORT                             TLS; add ?skip_verify=true to skip certificate checks
  redis://HOST1:PORT1?addr=HOST2:PORT2&addr=...  Redis Cluster: several seed nodes
  redis://SENTINEL1:PORT?addr=SENTINEL2:PORT&master_set=NAME
                                                 Sentinel: the primary of master set NAME; the
                                                 URL's user and password are the primary's, and
                                                 sentinel_username, sentinel_password the Sentinels'
  Query options: dial_timeout, write_timeout, client_name, protocol=2.
  Passwords are never printed; prefer $HOLDFAST_REDIS to --redis, which ps shows.
`

// target is a parsed --redis: the rueidis options and a form safe to print.
type target struct {
	opt     rueidis.ClientOption
	display string // the URL with its password replaced by "xxxxx"
}

// parseRedis parses a --redis value with rueidis' URL syntax. A bare
// HOST:PORT is taken as redis://HOST:PORT. Its errors never contain the
// password, nor any part of a malformed URL that could be one.
func parseRedis(flagValue string) (target, error) {
	s := flagValue
	if s == "" {
		s = os.Getenv("HOLDFAST_REDIS")
	}
	if s == "" {
		s = defaultRedis
	}
	if !strings.Contains(s, "://") {
		s = "redis://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		// url's messages quote pieces of the input, the password among them.
		return target{}, usageError{"--redis: malformed URL " + scrubUserinfo(s) + " (see `holdfast help`)"}
	}
	if pw, ok := u.User.Password(); ok {
		addSecret(pw)
	}
	// The Sentinels' own credentials: rueidis' URL syntax has none, so
	// they are taken out of the query before it parses the rest.
	q := u.Query()
	sentinelUser, sentinelPassword := q.Get("sentinel_username"), q.Get("sentinel_password")
	if q.Has("sentinel_password") {
		addSecret(sentinelPassword)
		q.Set("sentinel_password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	display := u.Redacted()
	q.Del("sentinel_username")
	q.Del("sentinel_password")
	u.RawQuery = q.Encode()
	opt, err := rueidis.ParseURL(u.String())
	if err != nil {
		return target{}, usageError{fmt.Sprintf("--redis %s: %s", display, strings.TrimPrefix(err.Error(), "redis: "))}
	}
	if (sentinelUser != "" || sentinelPassword != "") && opt.Sentinel.MasterSet == "" {
		return target{}, usageError{fmt.Sprintf("--redis %s: sentinel_username and sentinel_password need master_set", display)}
	}
	opt.Sentinel.Username, opt.Sentinel.Password = sentinelUser, sentinelPassword
	opt.DisableCache = true // holdfast reads nothing twice: no client-side cache
	if opt.Dialer.Timeout == 0 {
		opt.Dialer.Timeout = 5 * time.Second
	}
	if opt.ConnWriteTimeout == 0 {
		opt.ConnWriteTimeout = 5 * time.Second
	}
	return target{opt: opt, display: display}, nil
}

// scrubUserinfo hides everything between the scheme and the last '@' of a
// URL that did not parse, where a password would be.
func scrubUserinfo(s string) string {
	rest := s
	scheme := ""
	if i := strings.Index(s, "://"); i >= 0 {
		scheme, rest = s[:i+3], s[i+3:]
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = "xxxxx" + rest[i:]
	}
	return scheme + rest
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
