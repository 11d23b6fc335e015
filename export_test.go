package holdfast

import "github.com/holdfast/holdfast/actor"

// CrashActor makes the actor of name panic (see actor.System.Crash).
func CrashActor(c *Client, name string) { c.eng.(*actor.System).Crash(name) }
