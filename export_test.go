package holdfast

import (
	"time"

	"github.com/holdfast/holdfast/actor"
	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/scripts"
)

// CrashActor makes the actor of name panic (see actor.System.Crash).
func CrashActor(c *Client, name string) { c.eng.(*actor.System).Crash(name) }

// Field is the owner field c writes for owner.
func Field(c *Client, owner string) string { return scripts.Field(c.cfg.ClientID, c.instance, owner) }

// Sleeping reports how many of c's held locks sleep as records (see
// actor.System.Sleeping).
func Sleeping(c *Client) int { return c.eng.(*actor.System).Sleeping() }

// SetIdleTimeout sets the actors' linger of the Clients made until the
// returned func restores it. Tests using it must not run in parallel.
func SetIdleTimeout(d time.Duration) (restore func()) {
	old := idleTimeout
	idleTimeout = d
	return func() { idleTimeout = old }
}

// DeadLetters reports the letters lock actors were sent after they stopped
// (see actor.DeadLetters).
func DeadLetters() int64 { return actor.DeadLetters() }

// SendRelease sends l's Release letter to its actor without Release's own
// check of Lost first: a Release that checked just before its Lock ended
// and its actor passivated, then sent.
func SendRelease(l *Lock) { l.ref.Send(lockactor.MsgRelease, nil) }
