package sim

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"pgregory.net/rapid"
)

// A rapid harness for users' own code: Chaos draws one fault step between
// the steps of the code under test, Settle ends the faults and lets every
// Lock come to rest, so a rapid.Check body needs no state machine of its own
// for the World.

// chaosStep is one kind of fault Chaos can draw. A lock kind whose Locks
// keep state elsewhere (its own keys, its own channels) adds its faults
// here; the per-lock faults draw over the names of every Lock the test made
// (lockNames), whatever its kind.
type chaosStep struct {
	name string
	// apply injects the fault, drawing its parameters from t, and returns
	// the one-line description Chaos returns.
	apply func(w *World, t *rapid.T) string
}

// chaosSteps is the menu Chaos draws from, in the order rapid shrinks
// towards: time passing first, then faults that touch one lock or one
// client, then the ones that roll the whole deployment's data back, so a
// shrunk failure shows the narrowest fault that causes it. Entries repeat
// to weigh them: time passes more often than anything breaks, and a
// restart (which loses every key) is rarer than a failover.
var chaosSteps = func() []chaosStep {
	advance := chaosStep{"advance", func(w *World, t *rapid.T) string {
		d := time.Duration(rapid.IntRange(1, 4000).Draw(t, "ms")) * time.Millisecond
		w.Advance(d)
		return fmt.Sprintf("advance %v", d)
	}}
	failover := chaosStep{"failover", func(w *World, t *rapid.T) string {
		if len(w.nodes) == 1 {
			return "failover (no replica: nothing happens)"
		}
		lost := w.Failover()
		w.Revive()
		if lost {
			return "failover (unreplicated writes lost)"
		}
		return "failover (nothing lost)"
	}}
	restart := chaosStep{"restart", func(w *World, t *rapid.T) string {
		w.RestartPrimary()
		return "restart the primary without persistence (every key lost)"
	}}
	partition := chaosStep{"partition", func(w *World, t *rapid.T) string {
		c := w.drawClient(t)
		w.Partition(c.public)
		return "partition " + c.id
	}}
	heal := chaosStep{"heal", func(w *World, t *rapid.T) string {
		w.Heal()
		return "heal every partition and stop losing pub/sub messages"
	}}
	pause := chaosStep{"pause", func(w *World, t *rapid.T) string {
		c := w.drawClient(t)
		w.Pause(c.public)
		return "pause " + c.id
	}}
	resume := chaosStep{"resume", func(w *World, t *rapid.T) string {
		c := w.drawClient(t)
		w.Resume(c.public)
		return "resume " + c.id
	}}
	dropPubSub := chaosStep{"droppubsub", func(w *World, t *rapid.T) string {
		p := float64(rapid.IntRange(1, 10).Draw(t, "pubsubLoss/10")) / 10
		w.DropPubSub(p)
		return fmt.Sprintf("lose each pub/sub message with probability %.1f", p)
	}}
	steal := chaosStep{"steal", func(w *World, t *rapid.T) string {
		names := w.lockNames()
		if len(names) == 0 {
			return "steal (no lock yet: nothing happens)"
		}
		name := rapid.SampledFrom(names).Draw(t, "lock")
		w.Steal(name)
		return fmt.Sprintf("steal %q (its key deleted behind its holder's back)", name)
	}}
	return []chaosStep{
		advance, advance, advance, advance,
		steal, steal, pause, resume, partition, heal, dropPubSub,
		failover, failover, restart,
	}
}()

// Chaos draws one step from every fault the World supports — time passing,
// failover (losing the unreplicated writes), a restart without persistence,
// partition and heal of a drawn client, pause and resume of a drawn client,
// lost pub/sub messages, the theft of a drawn Lock's key — applies it and
// returns a one-line description. The drawn values are labelled, so rapid's
// failure output lists every step taken.
//
// It panics when the World has no clients (there would be nothing to
// disturb) or is closed: misuse of a test helper, like misuse of testing.T.
func (w *World) Chaos(t *rapid.T) string {
	if w.closed {
		panic("sim: Chaos on a closed World")
	}
	if len(w.clients) == 0 {
		panic("sim: Chaos on a World with no clients: create them with NewClient first")
	}
	i := rapid.SampledFrom(chaosMenu).Draw(t, "chaos")
	return chaosSteps[i.index].apply(w, t)
}

// chaosChoice is one entry of the menu as rapid draws it: its quoted name
// is what rapid's failure output prints for the draw.
type chaosChoice struct {
	name  string
	index int
}

func (c chaosChoice) GoString() string { return strconv.Quote(c.name) }

var chaosMenu = func() []chaosChoice {
	menu := make([]chaosChoice, len(chaosSteps))
	for i, s := range chaosSteps {
		menu[i] = chaosChoice{s.name, i}
	}
	return menu
}()

func (w *World) drawClient(t *rapid.T) *engine {
	return w.clients[rapid.IntRange(0, len(w.clients)-1).Draw(t, "client")]
}

// lockNames returns the names of every Lock the clients have asked for so
// far (granted, waiting or over), sorted.
func (w *World) lockNames() []string {
	seen := map[string]bool{}
	for _, e := range w.history {
		seen[e.Name] = true
	}
	for _, c := range w.clients {
		for name := range c.machines {
			seen[name] = true
		}
	}
	names := make([]string, 0, len(seen))
	for name := range seen {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// SettleLimit bounds the virtual time Settle runs for. A Lock still waiting
// after it waits on a hold nobody releases (or holdfast lost liveness).
const SettleLimit = time.Hour

// Settle ends every fault — heals partitions, stops losing pub/sub
// messages, brings failed nodes back, resumes every paused client — and
// runs the World until every Lock is granted or has given up (or
// SettleLimit of virtual time has passed), so that a test can check
// liveness at the end. It releases nothing: a Lock waiting behind a hold
// the test keeps stays waiting.
//
// It panics on a closed World.
func (w *World) Settle() {
	if w.closed {
		panic("sim: Settle on a closed World")
	}
	w.Heal()
	w.Revive()
	for _, c := range w.clients {
		w.Resume(c.public)
	}
	w.RunUntilIdle()
	limit := w.now.Add(SettleLimit)
	for w.waiting() > 0 && w.now.Before(limit) && w.Step() {
	}
	w.clock.sync()
}

// waiting counts the Locks neither granted nor over, and the calls from
// other goroutines not yet taken in (a Lock asked for, a cancellation).
func (w *World) waiting() int {
	n := w.Inbox()
	for _, c := range w.clients {
		for _, m := range c.machines {
			for id := range m.handles {
				if _, held := w.tokens[holdRef{c.id, uint64(id)}]; !held {
					n++
				}
			}
		}
	}
	return n
}

// Close closes every client of the World (as Client.Close does, running
// the World until their locks are released) and reports the first error.
// Chaos and Settle panic afterwards; History, Keys and Advance still work,
// to check what was left behind.
func (w *World) Close() error {
	var first error
	for _, c := range w.clients {
		if err := c.public.Close(); err != nil && first == nil {
			first = err
		}
	}
	w.closed = true
	return first
}
