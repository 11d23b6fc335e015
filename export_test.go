package holdfast

// CrashActor makes the actor of name panic (see actor.System.Crash).
func CrashActor(c *Client, name string) { c.sys.Crash(name) }
