// Package redisurl parses the Redis URLs that holdfast.Open and the holdfast
// command take: rueidis' URL syntax (rueidis.ParseURL) plus the Sentinels'
// own credentials, with the client options holdfast wants, and a form of the
// URL that is safe to print. It is the one parser of both, so that a URL
// that works on the command line works in a program.
//
// Nothing this package returns — an error, Target.Display — contains a
// password of the URL.
package redisurl

import (
	"net/url"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Forms is the help text that lists the URL forms, for the command's help
// and for anyone who documents a URL parameter.
const Forms = `  redis://HOST:PORT                              one server (HOST:PORT alone means the same)
  redis://USER:PASSWORD@HOST:PORT/DB             ACL user and password (":PASSWORD@" for the default user)
  rediss://HOST:PORT                             TLS; add ?skip_verify=true to skip certificate checks
  redis://HOST1:PORT1?addr=HOST2:PORT2&addr=...  Redis Cluster: several seed nodes
  redis://SENTINEL1:PORT?addr=SENTINEL2:PORT&master_set=NAME
                                                 Sentinel: the primary of master set NAME; the
                                                 URL's user and password are the primary's, and
                                                 sentinel_username, sentinel_password the Sentinels'
  Query options: dial_timeout, write_timeout, client_name, protocol=2.
`

// DefaultTimeout is the dial and write timeout of a URL that sets none
// (dial_timeout, write_timeout).
const DefaultTimeout = 5 * time.Second

// hidden stands for a password in everything this package prints.
const hidden = "xxxxx"

// Target is a parsed URL.
type Target struct {
	// Option is ready for rueidis.NewClient. Client-side caching is off
	// (holdfast reads nothing twice, and the cache's CLIENT TRACKING would
	// need one more ACL right).
	Option rueidis.ClientOption
	// Display is the URL with every password replaced by "xxxxx".
	Display string
	// Secrets are the passwords of the URL, decoded and as written, for
	// Redact.
	Secrets []string
}

// Redact replaces every password of t in msg: the second line of defence,
// for a library's or a server's message that quotes its input.
func (t Target) Redact(msg string) string {
	for _, s := range t.Secrets {
		msg = strings.ReplaceAll(msg, s, hidden)
	}
	return msg
}

// Error is a URL that Parse refused. Its text never contains a password.
type Error struct {
	URL    string // the URL with its passwords hidden, or, if it did not parse, everything where one could be
	Reason string // what is wrong with it
}

func (e *Error) Error() string {
	if e.URL == "" {
		return e.Reason
	}
	return e.URL + ": " + e.Reason
}

// Parse parses s with rueidis' URL syntax, plus sentinel_username and
// sentinel_password (the Sentinels' credentials; the URL's user and password
// are the primary's) and a bare HOST:PORT for redis://HOST:PORT. Its errors
// are *Error.
func Parse(s string) (Target, error) {
	if strings.TrimSpace(s) == "" {
		return Target{}, &Error{Reason: "no Redis URL given"}
	}
	if !strings.Contains(s, "://") {
		s = "redis://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		// url's messages quote pieces of the input, the password among them.
		return Target{}, &Error{URL: scrubUserinfo(s), Reason: "malformed URL"}
	}
	var t Target
	if pw, ok := u.User.Password(); ok {
		t.addSecret(pw)
		t.addSecret(writtenPassword(s))
	}
	// The Sentinels' own credentials: rueidis' URL syntax has none, so they
	// are taken out of the query before it parses the rest.
	q := u.Query()
	sentinelUser, sentinelPassword := q.Get("sentinel_username"), q.Get("sentinel_password")
	if q.Has("sentinel_password") {
		t.addSecret(sentinelPassword)
		t.addSecret(url.QueryEscape(sentinelPassword))
		q.Set("sentinel_password", hidden)
		u.RawQuery = q.Encode()
	}
	t.Display = u.Redacted()
	q.Del("sentinel_username")
	q.Del("sentinel_password")
	u.RawQuery = q.Encode()
	opt, err := rueidis.ParseURL(u.String())
	if err != nil {
		// Its messages name a scheme, a path, a number: never the userinfo.
		return Target{}, &Error{URL: t.Display, Reason: t.Redact(strings.TrimPrefix(err.Error(), "redis: "))}
	}
	if (sentinelUser != "" || sentinelPassword != "") && opt.Sentinel.MasterSet == "" {
		return Target{}, &Error{URL: t.Display, Reason: "sentinel_username and sentinel_password need master_set"}
	}
	opt.Sentinel.Username, opt.Sentinel.Password = sentinelUser, sentinelPassword
	opt.DisableCache = true
	if opt.Dialer.Timeout == 0 {
		opt.Dialer.Timeout = DefaultTimeout
	}
	if opt.ConnWriteTimeout == 0 {
		opt.ConnWriteTimeout = DefaultTimeout
	}
	t.Option = opt
	return t, nil
}

func (t *Target) addSecret(s string) {
	if s != "" {
		t.Secrets = append(t.Secrets, s)
	}
}

// writtenPassword returns the password of URL s as written, escapes and
// all, found as url.Parse finds it: after the first ':' of the userinfo,
// which ends at the authority's last '@'.
func writtenPassword(s string) string {
	authority := s[strings.Index(s, "://")+3:]
	if i := strings.IndexAny(authority, "/?#"); i >= 0 {
		authority = authority[:i]
	}
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return ""
	}
	_, pw, _ := strings.Cut(authority[:at], ":")
	return pw
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
		rest = hidden + rest[i:]
	}
	return scheme + rest
}
