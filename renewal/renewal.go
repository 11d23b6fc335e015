// Package renewal is holdfast's watchdog transport: it gathers the lease
// renewals that lock actors ask for within one tick of the timer wheel and
// sends them to Redis in batches, one renew-script call per group of up to
// MaxBatch keys that may share a call (any keys on a standalone server; on a
// cluster, the keys one master serves, whatever their slots), instead of one
// call per lock. It is holdfast's machinery, importable only because the
// module keeps its packages at the top level: it has no compatibility
// promise and may change in any release. Use package holdfast.
//
// # Concurrency
//
// Add may be called from any goroutine. A Batcher owns the goroutines that
// carry its calls and the one that runs Config.Prepare, and waits for them
// in Close. Each Item's Done is called
// exactly once, from one of those goroutines (or from Close's caller when the
// batcher is already closed); it must not block.
package renewal

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/holdfast/holdfast/scripts"
)

// ErrClosed is given to Done for items added after Close.
var ErrClosed = errors.New("renewal: batcher closed")

// Item is one renewal: extend Field's lease on Key to Lease, with Script.
type Item struct {
	// Script is the batch script: KEYS one key per item, ARGV a field and
	// a lease in milliseconds per item; its reply has one integer per
	// item, 1 when renewed. Items of different scripts never share a call.
	Script *scripts.Script
	Key    string
	Field  string
	Lease  time.Duration
	// Token is the fencing token of the hold renewed (0 for a waiter's
	// place), for the logs of a failed renewal (see Token).
	Token uint64
	// Done receives the outcome: sent is the clock time taken before the
	// batch carrying the item was sent (the start of the new lease's
	// validity); renewed is false when Key no longer holds Field; err is the
	// call's error, in which case renewed is meaningless.
	Done func(sent time.Time, renewed bool, err error)
}

// Exec runs script on keys with args (field, lease-ms pairs) and returns
// one result per key: true when renewed. keys and args are the Batcher's
// again once it returns: it must not keep them.
type Exec func(ctx context.Context, script *scripts.Script, keys, args []string) ([]bool, error)

// ExecMulti runs several batch calls at once — on a Redis Cluster one
// pipeline per node — and returns one outcome per call, as Exec would. Like
// Exec, it must not keep the calls' keys and args once it returns.
type ExecMulti func(ctx context.Context, calls []scripts.Call) ([][]bool, []error)

// Config configures a Batcher.
type Config struct {
	Clock clock.Clock
	// After runs fn once after at least d on the clock; the lock runtime
	// passes its timer wheel, so a batch closes at the next tick. Required.
	After func(d time.Duration, fn func())
	Exec  Exec // required
	// Group names the batch group of a key; keys of different groups never
	// share a call. Nil puts every key in one group (standalone Redis). On
	// a cluster the group is the node that serves the key's slot, as the
	// runtime last read the slot map: a call then spans slots, and the
	// runtime sends again, by slot, each key its node did not serve.
	Group func(key string) uint16
	// Prepare, when set with Group, runs beside the rounds, never in front
	// of them: the Batcher starts it on a goroutine of its own as a round
	// starts and as it ends, unless the last one is still running (one at
	// a time), with a context bounded by Timeout, and Close waits for it.
	// A cluster's runtime reads its slot map there when it has none or it
	// is stale; a round groups its keys by the map it has and sends them
	// at once, and a key so placed on the wrong node goes again by slot
	// (see Group). Prepare must return once its context is done.
	Prepare func(ctx context.Context)
	// MaxBatch is the most keys in one call. Default 100.
	MaxBatch int
	// ExecMulti, when set, sends the calls of a round together, up to
	// MaxCalls at a time, in place of Exec: one pipeline (per master on a
	// cluster) and one goroutine handing out the outcomes, rather than a
	// goroutine per call whose outcomes contend for the runtime's locks.
	ExecMulti ExecMulti
	// MaxCalls bounds the calls of one ExecMulti. Default 256.
	MaxCalls int
	// Context bounds every call; its cancellation aborts calls in flight.
	// Default context.Background().
	Context context.Context
	// Timeout bounds each call, on Clock, like any other script call of the
	// runtime: a renewal stuck on a dead connection fails in time for the
	// watchdog to try again before the lease runs out. Zero: no bound.
	Timeout time.Duration
}

// Batcher gathers renewals and sends them in batches.
type Batcher struct {
	cfg Config
	wg  sync.WaitGroup

	mu sync.Mutex // guards the fields below
	// pending holds the items of the batch being gathered; flushing is set
	// while a flush is scheduled for them.
	pending  []Item
	flushing bool
	closed   bool
	// preparing is set while a Prepare runs (see Config.Prepare).
	preparing bool
	// spareItems and spareBuf are a finished round's slices, for the next
	// round to fill (see round).
	spareItems []Item
	spareBuf   *roundBuffer
}

// New returns a Batcher. It starts no goroutine until a batch is sent,
// but for a first Prepare (see Config.Prepare): a cluster's slot map is
// then read while the first holds are taken, long before their first
// renewal round, which would otherwise group its keys by slot (one call
// per slot) for want of a map.
func New(cfg Config) *Batcher {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 100
	}
	if cfg.MaxCalls <= 0 {
		cfg.MaxCalls = 256
	}
	if cfg.Context == nil {
		cfg.Context = context.Background()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.New()
	}
	b := &Batcher{cfg: cfg}
	b.prepare()
	return b
}

// Add queues one renewal for the batch that closes at the next tick.
func (b *Batcher) Add(it Item) {
	b.AddAll([]Item{it})
}

// AddAll queues renewals for the batch that closes at the next tick, as
// many Adds would, taking the Batcher's lock once. It does not keep items.
func (b *Batcher) AddAll(items []Item) {
	if len(items) == 0 {
		return
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		for _, it := range items {
			it.Done(time.Time{}, false, ErrClosed)
		}
		return
	}
	if b.pending == nil {
		b.pending, b.spareItems = b.spareItems, nil
	}
	b.pending = append(b.pending, items...)
	schedule := !b.flushing
	b.flushing = true
	b.mu.Unlock()
	if schedule {
		b.cfg.After(0, b.flush)
	}
}

// flush hands every pending item to a goroutine that sends the round.
func (b *Batcher) flush() {
	b.mu.Lock()
	items := b.pending
	b.pending, b.flushing = nil, false
	if b.closed {
		b.mu.Unlock()
		for _, it := range items {
			it.Done(time.Time{}, false, ErrClosed)
		}
		return
	}
	b.wg.Add(1)
	b.mu.Unlock()
	go b.round(items)
}

// round sends items, grouped and cut into batches, and waits for every
// call: the grouping runs here, off the timer wheel's goroutine. The
// round's calls share one context (bounded by Timeout: they leave
// together) and one backing array of keys and args, and the round's
// slices are kept for the next round: a tick renewing thousands of holds
// allocates next to nothing. Prepare is started beside the round, as it
// starts (the first round of a cluster has no slot map yet) and as it ends
// (its calls may have found the map stale), and the round never waits for
// it: a slot map read that lands on a silent node must not hold back the
// renewals of every healthy node.
func (b *Batcher) round(items []Item) {
	defer b.wg.Done()
	b.prepare()
	defer b.prepare()
	groups := b.group(items)
	buf := b.takeBuffer(len(items))
	ctx, cancel := b.callContext()
	var wg sync.WaitGroup
	var multi [][]Item
	for _, group := range groups {
		for len(group) > 0 {
			n := min(len(group), b.cfg.MaxBatch)
			batch := group[:n:n]
			group = group[n:]
			if b.cfg.ExecMulti == nil {
				wg.Add(1)
				go b.send(ctx, &wg, batch, buf.call(batch))
				continue
			}
			if multi = append(multi, batch); len(multi) == b.cfg.MaxCalls {
				wg.Add(1)
				go b.sendMulti(ctx, &wg, multi, buf.calls(multi))
				multi = nil
			}
		}
	}
	if len(multi) > 0 {
		wg.Add(1)
		go b.sendMulti(ctx, &wg, multi, buf.calls(multi))
	}
	wg.Wait()
	cancel()
	b.keep(items, buf)
}

// prepare starts Prepare on a goroutine of the Batcher's unless one is
// running or the Batcher is closed.
func (b *Batcher) prepare() {
	if b.cfg.Prepare == nil || b.cfg.Group == nil {
		return
	}
	b.mu.Lock()
	if b.preparing || b.closed {
		b.mu.Unlock()
		return
	}
	b.preparing = true
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		ctx, cancel := b.callContext()
		b.cfg.Prepare(ctx)
		cancel()
		b.mu.Lock()
		b.preparing = false
		b.mu.Unlock()
	}()
}

// roundBuffer holds the keys and args of a round's calls.
type roundBuffer struct {
	keys, args []string
}

// takeBuffer returns the spare buffer, emptied, with room for n items.
func (b *Batcher) takeBuffer(n int) *roundBuffer {
	b.mu.Lock()
	buf := b.spareBuf
	b.spareBuf = nil
	b.mu.Unlock()
	if buf == nil {
		buf = new(roundBuffer)
	}
	if cap(buf.keys) < n {
		buf.keys = make([]string, 0, n)
		buf.args = make([]string, 0, 2*n)
	}
	buf.keys, buf.args = buf.keys[:0], buf.args[:0]
	return buf
}

// MaxSpare is the most items a round's slices are kept for (keep): a
// round of more (a burst: a hundred thousand holds granted together renew
// together) makes its own and leaves them to the collector, so what the
// Batcher keeps between rounds is bounded, not the largest round it saw.
const MaxSpare = 1024

// keep makes a finished round's slices the spare ones, cleared so they
// hold on to no item's closure or key, unless they are larger than
// MaxSpare items.
func (b *Batcher) keep(items []Item, buf *roundBuffer) {
	keepItems := cap(items) <= MaxSpare
	keepBuf := cap(buf.keys) <= MaxSpare
	if keepItems {
		clear(items)
	}
	if keepBuf {
		clear(buf.keys)
		clear(buf.args[:cap(buf.args)])
	}
	b.mu.Lock()
	if keepItems && cap(items) > cap(b.spareItems) {
		b.spareItems = items[:0]
	}
	if keepBuf {
		b.spareBuf = buf
	}
	b.mu.Unlock()
}

// call builds the batch call of batch in buf.
func (buf *roundBuffer) call(batch []Item) scripts.Call {
	k0, a0 := len(buf.keys), len(buf.args)
	for _, it := range batch {
		buf.keys = append(buf.keys, it.Key)
		buf.args = append(buf.args, it.Field, scripts.Millis(it.Lease))
	}
	return scripts.Call{Script: batch[0].Script, Keys: buf.keys[k0:len(buf.keys):len(buf.keys)], Args: buf.args[a0:len(buf.args):len(buf.args)]}
}

func (buf *roundBuffer) calls(batches [][]Item) []scripts.Call {
	calls := make([]scripts.Call, len(batches))
	for i, batch := range batches {
		calls[i] = buf.call(batch)
	}
	return calls
}

// group sorts items into the groups no call may span. Without Group, items
// of one script (the usual tick: every watchdog renewal runs the same one)
// stay in the slice they came in rather than being copied.
func (b *Batcher) group(items []Item) map[batchGroup][]Item {
	if b.cfg.Group == nil && len(items) > 0 {
		first := items[0].Script
		one := true
		for _, it := range items[1:] {
			if it.Script != first {
				one = false
				break
			}
		}
		if one {
			return map[batchGroup][]Item{{script: first}: items}
		}
	}
	groups := make(map[batchGroup][]Item)
	for _, it := range items {
		g := batchGroup{script: it.Script}
		if b.cfg.Group != nil {
			g.group = b.cfg.Group(it.Key)
		}
		groups[g] = append(groups[g], it)
	}
	return groups
}

// callContext bounds the calls of one round by Timeout.
func (b *Batcher) callContext() (context.Context, context.CancelFunc) {
	if b.cfg.Timeout > 0 {
		return b.cfg.Clock.WithTimeout(b.cfg.Context, b.cfg.Timeout)
	}
	return b.cfg.Context, func() {}
}

func (b *Batcher) send(ctx context.Context, wg *sync.WaitGroup, batch []Item, c scripts.Call) {
	defer wg.Done()
	sent := b.cfg.Clock.Now()
	ctx = context.WithValue(ctx, batchesKey{}, [][]Item{batch})
	renewed, err := b.cfg.Exec(ctx, c.Script, c.Keys, c.Args)
	report(batch, sent, renewed, err)
	let(batch, c)
}

// let lets go of what an answered call's items and arguments hold (their
// replies' closures, keys and fields): the round's slices keep them until
// its last call is answered otherwise, and a large round's calls are
// answered over many milliseconds.
func let(batch []Item, c scripts.Call) {
	clear(batch)
	clear(c.Keys)
	clear(c.Args)
}

func (b *Batcher) sendMulti(ctx context.Context, wg *sync.WaitGroup, batches [][]Item, calls []scripts.Call) {
	defer wg.Done()
	sent := b.cfg.Clock.Now()
	ctx = context.WithValue(ctx, batchesKey{}, batches)
	renewed, errs := b.cfg.ExecMulti(ctx, calls)
	for i, batch := range batches {
		var r []bool
		err := errors.New("renewal: ExecMulti answered fewer calls than sent")
		if i < len(renewed) && i < len(errs) {
			r, err = renewed[i], errs[i]
		}
		report(batch, sent, r, err)
		if i < len(calls) {
			let(batch, calls[i])
		}
	}
}

// batchesKey keys the batches of one Exec or ExecMulti in its context.
type batchesKey struct{}

// Token returns the Token of item i of call number call (0 for Exec) of the
// Exec or ExecMulti that ctx was given to, or 0: a wrapper of Exec reads it
// to name the hold in the log of a failed renewal.
func Token(ctx context.Context, call, i int) uint64 {
	if bs, ok := ctx.Value(batchesKey{}).([][]Item); ok && call < len(bs) && i < len(bs[call]) {
		return bs[call][i].Token
	}
	return 0
}

// report gives each item of batch its outcome.
func report(batch []Item, sent time.Time, renewed []bool, err error) {
	if err == nil && len(renewed) != len(batch) {
		err = errors.New("renewal: reply length differs from batch length")
	}
	for i, it := range batch {
		if err != nil {
			it.Done(sent, false, err)
			continue
		}
		it.Done(sent, renewed[i], nil)
	}
}

// batchGroup is what the items of one call share: the script, and the
// group (a cluster's master, see Config.Group) when keys are grouped.
type batchGroup struct {
	script *scripts.Script
	group  uint16
}

// Close refuses new items, fails the ones not yet sent with ErrClosed, and
// waits for the calls in flight and a Prepare running.
func (b *Batcher) Close() {
	b.mu.Lock()
	b.closed = true
	items := b.pending
	b.pending = nil
	b.mu.Unlock()
	for _, it := range items {
		it.Done(time.Time{}, false, ErrClosed)
	}
	b.wg.Wait()
}
