package lockactor

import "slices"

// callArgs keeps the arguments of a script call in the struct that owns
// the call (a request, an owner), so that the common call allocates no
// slice of its own. The array is written once, by the first call, before
// any call carries it, and only read after: a call still on its way (a
// timed-out attempt being repeated) never sees it change.
type callArgs struct {
	args [4]string
	n    int // arguments kept; 0: none yet
}

// use returns xs as a call's arguments: the kept array when it is unused
// (xs is kept) or holds xs already (a retry, a repeat), else a slice of its
// own (always, for a nil c).
func (c *callArgs) use(xs ...string) []string {
	if c == nil {
		return slices.Clone(xs)
	}
	if c.n == 0 && len(xs) <= len(c.args) {
		c.n = copy(c.args[:], xs)
	}
	if kept := c.args[:c.n:c.n]; slices.Equal(kept, xs) {
		return kept
	}
	return slices.Clone(xs)
}
