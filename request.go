package holdfast

import (
	"context"
	"fmt"
	"time"

	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/scripts"
)

// Lock asks for the lock name and returns at once; the lock is acquired in
// the background. Select on the returned Lock's Acquired and Lost channels,
// or call Wait.
//
// ctx bounds the whole life of the Lock, acquisition and hold: when it ends,
// a pending Lock gives up and a held one is released, and Err then wraps
// ctx.Err(). A forgotten Release in request-scoped code therefore cannot hold
// a lock forever. Use context.WithoutCancel for a Lock that outlives its
// request.
//
// Bad input (see ErrInvalidName, ErrInvalidOption) and a closed Client give a
// Lock that is already over, its Err saying why.
func (c *Client) Lock(ctx context.Context, name string, opts ...Option) *Lock {
	return c.request(ctx, name, lockactor.Reentrant, 0, opts)
}

// request starts a Lock call of the given kind and mode: the body every
// kind's entry point (Lock, FairLock, …) shares.
func (c *Client) request(ctx context.Context, name string, kind *lockactor.Kind, mode uint8, opts []Option) *Lock {
	return c.requestValue(ctx, name, kind, mode, "", opts)
}

// requestValue is request with the kind-defined Value of the request (an
// election's announced value).
func (c *Client) requestValue(ctx context.Context, name string, kind *lockactor.Kind, mode uint8, value string, opts []Option) *Lock {
	o := applyOptions(opts)
	if !c.usable() {
		return endedLock(name, errNoClient)
	}
	if err := c.check(ctx, name, o); err != nil {
		return endedLock(name, err)
	}
	kind, err := c.layoutKind(kind)
	if err != nil {
		return endedLock(name, err)
	}
	l := newLock()
	owner, _, _ := ownerFrom(ctx)
	req := c.newRequest(owner, o.lease, o.wait, kind, mode)
	req.Value = value
	l.c, l.times, l.ref.ID = c, c.obs.Start(), req.ID
	if owner != "" || kind != nil && kind.HoldField != nil {
		// A field the Client cannot build again from the ID (ownerField).
		l.mu.Lock()
		l.extra().field = req.Field
		l.mu.Unlock()
	}
	// The engine gives the handle its Ref (handle.Bind) before its machine
	// can call the handle, whose log lines name the lock from it.
	if _, err := c.eng.Enqueue(name, req, handle{l}); err != nil {
		l.ref.To = unstarted(name)
		handle{l}.Lost(err)
		return l
	}
	if ctx.Done() == nil {
		return l // a context that never ends needs no watching
	}
	c.watches.add(ctx, l)
	return l
}

// newRequest builds the request of one Lock call (of a Lock, or of a
// composite's part) for the machine: its ID, its owner field (owner "" gives
// the request an owner of its own), its lease (the watchdog's when lease is
// 0) and wait budget, and its kind (nil: the reentrant lock) and mode.
func (c *Client) newRequest(owner string, lease, wait time.Duration, kind *lockactor.Kind, mode uint8) lockactor.Request {
	id := c.nextID.Add(1)
	var field string
	switch {
	case c.cfg.Layout == LayoutRedisson && owner != "":
		field = scripts.RedissonField(c.cfg.ClientID+"-"+c.instance, owner, id)
	case owner != "":
		field = scripts.Field(c.cfg.ClientID, c.instance, owner)
	default:
		field = c.anonymousField(id)
	}
	if c.cfg.Layout == LayoutRedisson && kind == nil {
		kind = lockactor.RedissonLock // a composite's part
	}
	req := lockactor.Request{
		ID:       lockactor.ReqID(id),
		Field:    field,
		Lease:    lease,
		Watchdog: lease == 0,
		Wait:     wait,
		Kind:     kind,
		Mode:     mode,
	}
	if req.Watchdog {
		req.Lease = c.cfg.WatchdogTimeout
	}
	if kind != nil && kind.HoldField != nil {
		req.Field = kind.HoldField(req.Field, mode)
	}
	return req
}

// anonymousField is the owner field of the Client's request id made
// without an owner: every such request is an owner of its own.
func (c *Client) anonymousField(id uint64) string {
	if c.cfg.Layout == LayoutRedisson {
		return scripts.RedissonField(c.cfg.ClientID+"-"+c.instance, "", id)
	}
	return anonymousField(c.cfg.ClientID, c.instance, id)
}

// layoutKind maps a kind to the one the Client's Layout speaks for it, or
// ErrNotSupported.
func (c *Client) layoutKind(kind *lockactor.Kind) (*lockactor.Kind, error) {
	if c.cfg.Layout != LayoutRedisson {
		return kind, nil
	}
	switch kind {
	case nil, lockactor.Reentrant:
		return lockactor.RedissonLock, nil
	case lockactor.ReadWrite:
		return lockactor.RedissonRW, nil
	case lockactor.Fair:
		return lockactor.RedissonFair, nil
	}
	if kind.Name == lockactor.SemaphoreName {
		return lockactor.RedissonSemaphore(kind.Permits), nil
	}
	return nil, fmt.Errorf("%w: %s under the Redisson layout (Redisson's keys for it differ; see docs/redisson.md)", ErrNotSupported, kind.Name)
}

func (c *Client) check(ctx context.Context, name string, o lockOptions) error {
	if ctx == nil {
		return errNilContext
	}
	if err := scripts.ValidateName(name); err != nil {
		return err
	}
	if o.err != nil {
		return o.err
	}
	if _, _, err := ownerFrom(ctx); err != nil {
		return err
	}
	return nil
}
