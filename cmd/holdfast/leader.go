package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/holdfast/holdfast"
)

const leaderHelp = `usage: holdfast leader [--redis URL] [--json] [--watch] NAME

Print who leads election NAME (campaigns of holdfast exec --elect, or of
Client.Elect): the leader's value and term, or that nobody leads. The term is the
leader's fencing token, greater than every earlier leader's.

Options (before or after NAME):
  --redis URL   Redis to use (see below)
  --json        print one JSON object a line: {"name","leading","value","term"}
                (term 0 and value "" when nobody leads)
  --watch       print the current state, then a line at every change (a new
                leader; nobody, once a leader resigns or its lease runs out), until
                interrupted (SIGINT, SIGTERM: exit 0). A leader is never followed
                by an older one, unless Redis lost its data (a failover that lost
                the last grant, a restart without persistence: terms may start
                again); changes closer together than a round trip may be merged
                into the latest one. When Redis cannot be read (its connection
                broke, or a read failed), the watch says so once on stderr, and
                again when Redis answers; it goes on watching.

Output lines: "VALUE (term N)", or "nobody leads". A name in use as another kind
of lock is an error (exit 1).
`

// leaderLine is one state of `holdfast leader --json`.
type leaderLine struct {
	Name    string `json:"name"`
	Leading bool   `json:"leading"`
	Value   string `json:"value"`
	Term    uint64 `json:"term"`
}

func leaderMain(args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("leader")
	addr := fs.String("redis", "", "")
	asJSON := fs.Bool("json", false, "")
	watch := fs.Bool("watch", false, "")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return 0, err
	}
	if len(rest) != 1 {
		return 0, usageError{"leader: name one election (usage: holdfast leader [--json] [--watch] NAME)"}
	}
	name := rest[0]
	if err := checkNames("leader", rest); err != nil {
		return 0, err
	}
	t, err := parseRedis(*addr)
	if err != nil {
		return 0, err
	}
	// Elections have no Redisson layout: the holdfast layout whatever
	// $HOLDFAST_LAYOUT says.
	c, done, err := opsClient(t)
	if err != nil {
		return 0, err
	}
	defer done()
	print := func(l holdfast.Leader) error {
		if *asJSON {
			return json.NewEncoder(stdout).Encode(leaderLine{Name: name, Leading: l.Term != 0, Value: l.Value, Term: l.Term})
		}
		_, err := fmt.Fprintln(stdout, leaderText(l))
		return err
	}
	// One read first: a wrong kind, an unreachable server or a refused
	// user is an error now, not a silent watch.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	now, err := c.Leader(ctx, name)
	cancel()
	if errors.Is(err, holdfast.ErrWrongKind) {
		return exitFailure, fmt.Errorf("%q is in use as another kind of lock, not an election", name)
	}
	if err != nil {
		return 0, redisFailure("leader "+strconv.Quote(name), err)
	}
	if !*watch {
		return 0, print(now)
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(signals)
	wctx, stop := context.WithCancel(context.Background())
	defer stop()
	states := c.Observe(wctx, name)
	// Observe's first state is read after its subscription, so it is at
	// least as new as now: print it, and then only what differs. A state
	// with Err says that Redis cannot be read (said once on stderr); the
	// next state without says that it answers again.
	var last holdfast.Leader
	var lastErr error
	printed, down := false, false
	for {
		select {
		case l, ok := <-states:
			if !ok && lastErr != nil {
				return exitFailure, fmt.Errorf("leader: the observation ended: %w", lastErr)
			}
			if !ok {
				return exitFailure, errors.New("leader: the observation ended")
			}
			if l.Err != nil {
				lastErr = l.Err
				if !down {
					down = true
					fmt.Fprintf(stderr, "holdfast leader: cannot read %q from Redis (%v); still watching\n", name, cause(l.Err))
				}
				continue
			}
			if down {
				down = false
				fmt.Fprintf(stderr, "holdfast leader: Redis answers again; watching %q\n", name)
			}
			if printed && l == last {
				continue
			}
			if err := print(l); err != nil {
				return exitFailure, err
			}
			last, printed = l, true
		case <-signals:
			return 0, nil
		}
	}
}

// cause is what an observer's Err wraps: the read's own error, without the
// name the watch's message already gives.
func cause(err error) error {
	if inner := errors.Unwrap(err); inner != nil {
		return inner
	}
	return err
}

// leaderText is one state as a plain line.
func leaderText(l holdfast.Leader) string {
	if l.Term == 0 {
		return "nobody leads"
	}
	v := l.Value
	if strings.IndexFunc(v, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		v = strconv.Quote(v) // one state, one line
	}
	return fmt.Sprintf("%s (term %d)", v, l.Term)
}
