package holdfast

import (
	"errors"
	"fmt"
	"time"
)

// The end of a composite and the answer to its Release: the composite's
// Lost closes once every node that answers has answered for its hold, and
// not later than the nodes' call timeout; Release's answer names the parts
// whose nodes did not confirm, as the policy decides (see Lock.Release).

// callTimeout is the longest a call to any of the parts' nodes may take.
func (c *composite) callTimeout() time.Duration {
	var d time.Duration
	for _, t := range c.targets {
		d = max(d, t.Client.cfg.CallTimeout)
	}
	return d
}

func (c *composite) maybeFinish() {
	if c.state != compEnding || (c.live > 0 && !c.settleDue && !(c.userRelease && c.pol.released(c))) {
		return
	}
	if c.settle != nil {
		c.settle.Stop()
		c.settle = nil
	}
	c.state = compOver
	if c.userRelease {
		c.l.answerRelease(errors.Join(append(c.relErrs, c.pol.unconfirmed(c, c.unconfirmedParts())...)...))
	}
	c.l.end(c.cause)
}

// unconfirmedParts returns one error per part whose hold the composite gave
// back without its node confirming it: its release's first call failed, or
// it had no answer when the end stopped waiting. Each error names the part
// and wraps ErrReleaseUnconfirmed.
func (c *composite) unconfirmedParts() []error {
	perPart := make([]error, len(c.targets))
	for _, a := range c.returning {
		if perPart[a.part] != nil {
			continue
		}
		switch {
		case a.unconfirmed != nil:
			perPart[a.part] = c.partErr(a, a.unconfirmed)
		case !a.done:
			perPart[a.part] = c.partErr(a, fmt.Errorf("%w: no answer within %v", ErrReleaseUnconfirmed, c.callTimeout()))
		}
	}
	var errs []error
	for _, err := range perPart {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
