package holdfast

import (
	"fmt"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/internal/redisurl"
)

// Open dials Redis at url and returns a Client that owns that connection:
// Close closes both. cfg is as for New, but without Redis: a Config with
// Redis set is refused (bring your own client to New instead).
//
// url has the syntax of the holdfast command's --redis (rueidis' ParseURL,
// plus the Sentinels' credentials):
//
//	redis://HOST:PORT                              one server (HOST:PORT alone means the same)
//	redis://USER:PASSWORD@HOST:PORT/DB             ACL user and password (":PASSWORD@" for the default user)
//	rediss://HOST:PORT                             TLS; ?skip_verify=true skips the certificate check
//	redis://HOST1:PORT1?addr=HOST2:PORT2&addr=...  Redis Cluster: several seed nodes
//	redis://S1:PORT?addr=S2:PORT&master_set=NAME   Sentinel: the primary of master set NAME;
//	                                               sentinel_username and sentinel_password are the
//	                                               Sentinels' credentials, the URL's the primary's
//
// with the query options dial_timeout and write_timeout (default 5s each),
// client_name and protocol=2. Client-side caching is off: holdfast reads
// nothing twice.
//
// A bad url or Config ends Open with an error wrapping ErrInvalidOption
// before anything is dialled; a Redis that cannot be reached or refuses the
// user, with an error that wraps the dial's or the server's (a
// *rueidis.RedisError for a refusal such as WRONGPASS). No error shows a
// password of url.
func Open(url string, cfg Config) (*Client, error) {
	if cfg.Redis != nil {
		return nil, fmt.Errorf("%w: Open dials its own Redis client from the URL, so Config.Redis must be nil (pass your client to New instead)", ErrInvalidOption)
	}
	t, err := redisurl.Parse(url)
	if err != nil {
		return nil, fmt.Errorf("%w: Open: %v", ErrInvalidOption, err) // %v: err is shown, its URL already redacted
	}
	if err := cfg.validateOptions(); err != nil {
		return nil, err
	}
	rc, err := rueidis.NewClient(t.Option)
	if err != nil {
		return nil, &dialError{msg: "holdfast: cannot use Redis at " + t.Display + ": " + t.Redact(err.Error()), err: err}
	}
	cfg.Redis = rc
	c, err := New(cfg)
	if err != nil {
		rc.Close()
		return nil, err
	}
	// After the engine and the subscriptions, which use rc.
	c.closers = append(c.closers, rc.Close)
	return c, nil
}

// dialError is Open's failure to dial: its text is redacted, and it wraps
// the failure for errors.Is and errors.As.
type dialError struct {
	msg string
	err error
}

func (e *dialError) Error() string { return e.msg }
func (e *dialError) Unwrap() error { return e.err }
