package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/holdfast/holdfast"
)

// The election scenario's shape.
const (
	// electHandovers is how many resignations a round measures.
	electHandovers = 40
	// electPoll is how often the peers' observer polls the leader's value:
	// what a user who builds an election from a lock would pick.
	electPoll = 100 * time.Millisecond
	// electTimeout bounds one handover: one not done by then is counted
	// as stalled (stalled_handovers) and ends the round with the figures
	// it has.
	electTimeout = 10 * time.Second
)

// runElection measures a leader's handover: two candidates on Clients of
// their own take turns (the leader resigns while the other waits), and a
// third Client observes. Per handover: from the leader's Release call to
// the waiting candidate leading (handover_p50_us/p99), and to the remote
// observer being told the new leader (observer_notice_p50_us/p99).
//
// holdfast: Elect, Release, and Observe on the third Client. The peers have
// no election: a user builds one from a lock — rueidislock's WithContext or
// a redsync Mutex as the campaign, the new leader SETs its value on a key
// after it acquires, and the observer polls GET every 100 ms. redislock
// polls like redsync and is left out.
func runElection(e *env) error {
	libs := []string{}
	for _, l := range e.libs {
		if l == libHoldfast || l == libRueidislock || l == libRedsync {
			libs = append(libs, l)
		}
	}
	n := electHandovers
	if e.quick {
		n = 20
	}
	for r := range e.rounds() {
		for _, lib := range rotate(libs, r) {
			var handovers, notices []time.Duration
			var err error
			labelled("election", lib, func(ctx context.Context) {
				if lib == libHoldfast {
					handovers, notices, err = electHoldfast(ctx, e, r, n)
				} else {
					handovers, notices, err = electPeer(ctx, e, lib, r, n)
				}
			})
			stalled := 0.0
			if errors.Is(err, errStalled) {
				e.notef("election %s round %d: %v after %d handovers", lib, r, err, len(handovers))
				stalled, err = 1, nil
			}
			if err != nil {
				return fmt.Errorf("election %s: %w", lib, err)
			}
			e.res.add("election", lib, "stalled_handovers", stalled)
			e.res.add("election", lib, "handover_p50_us", us(percentile(handovers, 50)))
			e.res.add("election", lib, "handover_p99_us", us(percentile(handovers, 99)))
			e.res.add("election", lib, "observer_notice_p50_us", us(percentile(notices, 50)))
			e.res.add("election", lib, "observer_notice_p99_us", us(percentile(notices, 99)))
		}
	}
	return nil
}

// pause gives a new candidate time to be waiting (20 ms), then a random
// part of a poll interval more, so that resignations fall at every phase
// of the peers' poll rather than locked to it.
func pause() {
	time.Sleep(20*time.Millisecond + rand.N(electPoll))
}

// errStalled: a handover was not done within electTimeout.
var errStalled = errors.New("stalled: no new leader")

// rotate returns libs rotated by r, as env.order does for every library.
func rotate(libs []string, r int) []string {
	out := make([]string, 0, len(libs))
	for i := range libs {
		out = append(out, libs[(r+i)%len(libs)])
	}
	return out
}

// electHoldfast runs n handovers of holdfast's Elect, observed by Observe
// on a third Client.
func electHoldfast(ctx context.Context, e *env, round, n int) (handovers, notices []time.Duration, err error) {
	cls, done, err := e.holdfastClients(3)
	defer done()
	if err != nil {
		return nil, nil, err
	}
	name := fmt.Sprintf("elect:%d", round)
	octx, stop := context.WithCancel(ctx)
	defer stop()
	states := cls[2].Observe(octx, name)
	// waitFor returns when the observer is told a leader of term, and when.
	waitFor := func(term uint64) (time.Time, error) {
		timeout := time.After(electTimeout)
		for {
			select {
			case st, ok := <-states:
				if !ok {
					return time.Time{}, errors.New("the observation ended")
				}
				if st.Term >= term {
					return time.Now(), nil
				}
			case <-timeout:
				return time.Time{}, fmt.Errorf("no observer notice of term %d within %v", term, electTimeout)
			}
		}
	}
	campaign := func(i int) (*holdfast.Lock, error) {
		l := cls[i].Elect(ctx, name, fmt.Sprintf("candidate-%d", i))
		select {
		case <-l.Acquired:
			return l, nil
		case <-l.Lost:
			return nil, l.Err()
		case <-time.After(electTimeout):
			l.Release(ctx)
			return nil, errors.New("no first leader")
		}
	}
	leader, err := campaign(0)
	if err != nil {
		return nil, nil, err
	}
	if _, err := waitFor(leader.Token()); err != nil {
		return nil, nil, err
	}
	for k := range n {
		next := cls[(k+1)%2].Elect(ctx, name, fmt.Sprintf("candidate-%d", (k+1)%2))
		pause()
		start := time.Now()
		leader.Release(ctx)
		select {
		case <-next.Acquired:
		case <-next.Lost:
			return nil, nil, fmt.Errorf("handover %d: the candidate's campaign ended: %w", k, next.Err())
		case <-time.After(electTimeout):
			return handovers, notices, fmt.Errorf("handover %d: %w within %v", k, errStalled, electTimeout)
		}
		handovers = append(handovers, time.Since(start))
		at, err := waitFor(next.Token())
		if err != nil {
			return nil, nil, fmt.Errorf("handover %d: %w", k, err)
		}
		notices = append(notices, at.Sub(start))
		leader = next
	}
	leader.Release(ctx)
	return handovers, notices, nil
}

// electPeer runs n handovers of an election built from lib's lock: the
// leader SETs its value on a key after it acquires, and an observer polls
// GET every electPoll.
func electPeer(ctx context.Context, e *env, lib string, round, n int) (handovers, notices []time.Duration, err error) {
	// Ends a campaign left waiting by a stall (after the clients close).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ctr := newCounter()
	var cands [2]locker
	for i := range cands {
		if cands[i], err = e.open(lib, ctr, openOpts{watchdog: peerLease}); err != nil {
			return nil, nil, err
		}
		defer cands[i].Close()
	}
	rdb := goredis.NewClient(&goredis.Options{Addr: e.srv.addr})
	defer rdb.Close()
	name := fmt.Sprintf("elect:%s:%d", lib, round)
	valueKey := name + ":leader"

	// The observer: polls the value and reports each new one with the time
	// it saw it.
	seen := make(chan string, 1) // closer: none; the poller sends, drops stale values
	pctx, stop := context.WithCancel(ctx)
	pollDone := make(chan struct{})
	defer func() { stop(); <-pollDone }()
	go func() {
		defer close(pollDone)
		t := time.NewTicker(electPoll)
		defer t.Stop()
		last := ""
		for {
			select {
			case <-pctx.Done():
				return
			case <-t.C:
			}
			v, err := rdb.Get(pctx, valueKey).Result()
			if err != nil || v == last {
				continue
			}
			last = v
			select {
			case <-seen:
			default:
			}
			seen <- v
		}
	}()
	waitFor := func(value string) (time.Time, error) {
		timeout := time.After(electTimeout)
		for {
			select {
			case v := <-seen:
				if v == value {
					return time.Now(), nil
				}
			case <-timeout:
				return time.Time{}, fmt.Errorf("the poller did not see %q within %v", value, electTimeout)
			}
		}
	}
	// A term per handover, in the value, so the observer tells leaders
	// apart (a lock of these peers has no token to use instead).
	lead := func(i, term int) (h held, value string, at time.Time, err error) {
		if h, err = cands[i].Lock(ctx, name); err != nil {
			return nil, "", at, err
		}
		at = time.Now()
		value = fmt.Sprintf("candidate-%d:%d", i, term)
		return h, value, at, rdb.Set(ctx, valueKey, value, 0).Err()
	}
	leader, value, _, err := lead(0, 0)
	if err != nil {
		return nil, nil, err
	}
	if _, err := waitFor(value); err != nil {
		return nil, nil, err
	}
	for k := range n {
		type grant struct {
			h     held
			value string
			at    time.Time
			err   error
		}
		got := make(chan grant, 1)
		go func() {
			h, v, at, err := lead((k+1)%2, k+1)
			got <- grant{h, v, at, err}
		}()
		pause()
		start := time.Now()
		leader.Release(ctx)
		var g grant
		select {
		case g = <-got:
		case <-time.After(electTimeout):
			return handovers, notices, fmt.Errorf("handover %d: %w within %v", k, errStalled, electTimeout)
		}
		if g.err != nil {
			return nil, nil, fmt.Errorf("handover %d: %w", k, g.err)
		}
		// The candidate leads when its lock is granted; the SET that
		// announces it is the observer's part.
		handovers = append(handovers, g.at.Sub(start))
		at, err := waitFor(g.value)
		if err != nil {
			return nil, nil, fmt.Errorf("handover %d: %w", k, err)
		}
		notices = append(notices, at.Sub(start))
		leader = g.h
	}
	leader.Release(ctx)
	rdb.Del(ctx, valueKey)
	return handovers, notices, nil
}
