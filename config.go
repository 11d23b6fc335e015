package holdfast

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/redis/rueidis"
	"go.opentelemetry.io/otel/metric"

	"github.com/holdfast/holdfast/lockactor"
)

// Config: a Client's settings, their defaults and their validation.

// Config configures a Client. Only Redis is required (by New; Open dials
// its own).
type Config struct {
	// Redis is the client every script call and subscription goes through.
	// The Client does not close it. Leave it nil for Open, which dials one
	// from a URL and closes it on Close.
	Redis rueidis.Client
	// Clock is the source of all time in the library. Default clock.New().
	Clock clock.Clock
	// WatchdogTimeout is the lease of a Lock without WithLease; the watchdog
	// renews it every WatchdogTimeout/3 while the Lock is held. Default 30s;
	// at least MinLease, at most MaxLease.
	WatchdogTimeout time.Duration
	// Logger receives the library's logs, protoactor's included. Default:
	// discard.
	Logger *slog.Logger
	// ClientID is a readable label at the head of every owner field this
	// Client writes (CLIENTID:INSTANCE:OWNER, see scripts.Field), for
	// operators and `holdfast status`. Default: the host name and process id,
	// HOST/PID. It must not contain ':'. It need not be unique: INSTANCE is
	// drawn at random for every Client, so Clients sharing a ClientID still
	// exclude each other.
	ClientID string
	// CallTimeout bounds each Redis call, on Clock. A call that times out
	// may still have run; the runtime repeats it to learn the outcome.
	// Default 5s. Durations here and in options may be as long as
	// math.MaxInt64, which means "very long", never "at once".
	CallTimeout time.Duration
	// HandoffLimit and HandoffWindow bound local handoffs. When a Lock is
	// released while another Lock of this Client waits for the same name,
	// the release and the waiter's grant run as one Redis call, which wakes
	// no other process. Up to HandoffLimit handoffs run in a row, within
	// HandoffWindow of the name's last grant from Redis; then the lock goes
	// back to Redis and this Client's waiters compete for it with other
	// processes' waiters on equal terms. Defaults 100 and 10ms; a negative
	// HandoffLimit turns local handoff off.
	HandoffLimit  int
	HandoffWindow time.Duration
	// SyncReplicas, when positive, makes every script call but a release
	// (grants, renewals, fair-queue places and keep-alives) WAIT for this many
	// replicas to acknowledge it, the script and the WAIT sent together on one
	// connection; Acquired closes only after the grant's acks. A fresh grant
	// with too few acks within SyncTimeout is undone and its Lock ends with
	// ErrReplicaSync; a renewal with too few acks counts as failed (the hold
	// is Lost at its deadline if none syncs); other calls short of acks count
	// as they are. It keeps a hold through a failover to an acknowledging
	// replica; it also turns local handoff off. Default 0: no WAIT (a
	// failover can lose a hold's key; the holder then learns it through
	// Lost). See docs/deployments.md.
	SyncReplicas int
	// SyncTimeout bounds each WAIT of SyncReplicas. Default 1s.
	SyncTimeout time.Duration
	// WaiterTimeout bounds how long a dead process keeps its places in fair
	// lock queues (FairLock): live waiters renew their places every
	// WaiterTimeout/3, so a crashed process's waiters all leave within
	// WaiterTimeout, and a grant its waiter does not confirm within
	// WaiterTimeout passes to the next waiter. Default 5s; at least
	// MinLease.
	WaiterTimeout time.Duration
	// MeterProvider receives the Client's metrics (see docs/operations.md):
	// acquisitions by outcome, wait and hold times, renewals, lost holds,
	// held and waiting Locks, Redis call latency. Default: none recorded.
	MeterProvider metric.MeterProvider
	// Layout is the Redis layout and protocol the Client speaks: holdfast's
	// own (LayoutHoldfast, the default) or Redisson's (LayoutRedisson), so
	// that Go and Java processes lock the same names. Every Client of a
	// name, in any language, must speak the same layout. See
	// docs/redisson.md.
	Layout Layout
}

// Layout is a Redis layout and protocol a Client speaks (Config.Layout).
type Layout int

const (
	// LayoutHoldfast: holdfast's own keys (docs/operations.md, "Redis layout").
	LayoutHoldfast Layout = iota
	// LayoutRedisson: Redisson's RLock/RFencedLock and RReadWriteLock keys,
	// fields, channels and messages: Lock and ReadLock/WriteLock (and the
	// composites made of Locks) share names with Java processes using
	// Redisson; FairLock is Redisson's RFairLock, its waiters in one line
	// with Java's (give WaiterTimeout at least the Java clients'
	// fairLockWaitTimeout, Redisson's default 5 minutes, or a Java grant
	// can cost a Go waiter its place); Semaphore is Redisson's
	// RPermitExpirableSemaphore (a permit has no fencing token there: Token
	// is 0). Elect, Leader and Observe end with ErrNotSupported.
	LayoutRedisson
)

func (l Layout) String() string {
	switch l {
	case LayoutHoldfast:
		return "holdfast"
	case LayoutRedisson:
		return "redisson"
	}
	return "Layout(" + strconv.Itoa(int(l)) + ")"
}

// ParseLayout reads a Layout's name ("holdfast", "redisson"; "" is
// holdfast), as the CLI's --layout and HOLDFAST_LAYOUT take it.
func ParseLayout(s string) (Layout, error) {
	switch strings.ToLower(s) {
	case "", "holdfast":
		return LayoutHoldfast, nil
	case "redisson":
		return LayoutRedisson, nil
	}
	return 0, fmt.Errorf("%w: layout %q (want holdfast or redisson)", ErrInvalidOption, s)
}

// DefaultWatchdogTimeout is Config.WatchdogTimeout's default.
const DefaultWatchdogTimeout = 30 * time.Second

const (
	defaultCallTimeout = 5 * time.Second
	defaultSyncTimeout = time.Second
	wheelTick          = 10 * time.Millisecond
	wheelSlots         = 512
	// deadlineSlack is how much before a hold's validity deadline its
	// deadline timer is set, so that Lost closes before the deadline even
	// when the timer is late: one wheel tick (a timer fires up to a tick
	// after its time by design) plus the scheduling delay of the wheel's
	// goroutine and the actor. BenchmarkLatenessUnderLoad (timerwheel)
	// measured on 2 shared CPUs: p99.9 20ms past the deadline with the CPUs
	// busy but not saturated, and 100-200ms with spinning goroutines
	// outnumbering the CPUs. Two ticks cover the first; no slack a 50ms
	// lease can afford covers the second, which is why a holder checks
	// Deadline() before acting and the resource checks fencing tokens (see
	// docs/guarantees.md).
	deadlineSlack = 2 * wheelTick
)

// Validate reports the first problem with c, wrapped in ErrInvalidOption.
func (c *Config) Validate() error {
	if c.Redis == nil {
		return fmt.Errorf("%w: Config.Redis is required", ErrInvalidOption)
	}
	return c.validateOptions()
}

func (c *Config) validateOptions() error {
	switch {
	case c.WatchdogTimeout != 0 && checkLease("WatchdogTimeout", c.WatchdogTimeout) != nil:
		return checkLease("WatchdogTimeout", c.WatchdogTimeout)
	case c.WaiterTimeout != 0 && checkLease("WaiterTimeout", c.WaiterTimeout) != nil:
		return checkLease("WaiterTimeout", c.WaiterTimeout)
	case c.CallTimeout < 0:
		return fmt.Errorf("%w: negative CallTimeout", ErrInvalidOption)
	case c.HandoffWindow < 0:
		return fmt.Errorf("%w: negative HandoffWindow", ErrInvalidOption)
	case c.SyncReplicas < 0:
		return fmt.Errorf("%w: negative SyncReplicas", ErrInvalidOption)
	case c.SyncTimeout < 0:
		return fmt.Errorf("%w: negative SyncTimeout", ErrInvalidOption)
	case strings.Contains(c.ClientID, ":"):
		return fmt.Errorf("%w: ClientID %q contains ':'", ErrInvalidOption, c.ClientID)
	case c.Layout != LayoutHoldfast && c.Layout != LayoutRedisson:
		return fmt.Errorf("%w: unknown %v", ErrInvalidOption, c.Layout)
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Clock == nil {
		c.Clock = clock.New()
	}
	if c.WatchdogTimeout == 0 {
		c.WatchdogTimeout = DefaultWatchdogTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ClientID == "" {
		c.ClientID = defaultClientID()
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = defaultCallTimeout
	}
	if c.WaiterTimeout == 0 {
		c.WaiterTimeout = DefaultWaiterTimeout
	}
	if c.SyncTimeout == 0 {
		c.SyncTimeout = defaultSyncTimeout
	}
	if c.SyncReplicas > 0 {
		// A handoff's grant is not synced (actor.Synced).
		c.HandoffLimit = -1
	}
}

// defaultClientID is HOST/PID, with any ':' of the host name replaced.
func defaultClientID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return strings.ReplaceAll(host, ":", "_") + "/" + strconv.Itoa(os.Getpid())
}

// newInstance draws the random part of a Client's owner fields: 48 bits,
// so that Clients sharing a ClientID do not collide.
func newInstance() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// DefaultWaiterTimeout is Config.WaiterTimeout's default.
const DefaultWaiterTimeout = 5 * time.Second

// machine is the lock state machines' configuration.
func (c *Config) machine() lockactor.Config {
	return lockactor.Config{Slack: deadlineSlack, HandoffLimit: c.HandoffLimit, HandoffWindow: c.HandoffWindow,
		WaiterTimeout: c.WaiterTimeout, ReleaseBound: c.CallTimeout}
}
