package sim

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
)

// worldClock is the clock.Clock of the World's clients and of World.Clock.
// Now reads the World's time, kept in an atomic so that any goroutine may
// read it while the World runs. Timers, tickers, sleeps and deadlines run on
// a clock.Mock that the World moves (at the end of each Advance) only once
// one of them has been asked for: moving a Mock costs a millisecond of real
// time (it sleeps to let timer goroutines run), which would dominate
// simulations that advance time thousands of times a second.
type worldClock struct {
	now  atomic.Int64 // the World's time, in Unix nanoseconds
	mock *clock.Mock
	used atomic.Bool
}

func newWorldClock(start time.Time) *worldClock {
	c := &worldClock{mock: clock.NewMock()}
	c.now.Store(start.UnixNano())
	c.mock.Set(start)
	return c
}

// set follows the World's time; sync also moves the mock, firing its timers.
func (c *worldClock) set(t time.Time) { c.now.Store(t.UnixNano()) }

func (c *worldClock) sync() {
	if c.used.Load() {
		c.mock.Set(c.Now())
	}
}

// timers returns the mock, brought to the World's time the first time.
func (c *worldClock) timers() *clock.Mock {
	if !c.used.Swap(true) {
		c.mock.Set(c.Now())
	}
	return c.mock
}

func (c *worldClock) Now() time.Time                  { return time.Unix(0, c.now.Load()).UTC() }
func (c *worldClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c *worldClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

func (c *worldClock) After(d time.Duration) <-chan time.Time { return c.timers().After(d) }
func (c *worldClock) AfterFunc(d time.Duration, f func()) *clock.Timer {
	return c.timers().AfterFunc(d, f)
}
func (c *worldClock) Sleep(d time.Duration)                 { c.timers().Sleep(d) }
func (c *worldClock) Tick(d time.Duration) <-chan time.Time { return c.timers().Tick(d) }
func (c *worldClock) Ticker(d time.Duration) *clock.Ticker  { return c.timers().Ticker(d) }
func (c *worldClock) Timer(d time.Duration) *clock.Timer    { return c.timers().Timer(d) }
func (c *worldClock) WithDeadline(parent context.Context, d time.Time) (context.Context, context.CancelFunc) {
	return c.timers().WithDeadline(parent, d)
}
func (c *worldClock) WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return c.timers().WithTimeout(parent, d)
}
