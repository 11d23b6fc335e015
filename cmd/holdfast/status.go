package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/scripts"
)

const statusHelp = `usage: holdfast status [--redis URL] [--layout L] [--json] NAME...

Show what Redis holds of each lock NAME: its kind, holders (CLIENTID:INSTANCE:OWNER as the
holder's Client stored it, ID:THREAD under --layout redisson (a semaphore's permit id
there), and its reentry count),
remaining TTL, fencing counter and queued waiters.
` + "\n" + layoutHelp

const listHelp = `usage: holdfast list [--redis URL] [--layout L] [PATTERN]

List the lock names held now, one a line, sorted. PATTERN is a Redis glob on the
name (*, ?, [abc]; default *). On a cluster every node is scanned.
` + "\n" + layoutHelp

const forceUnlockHelp = `usage: holdfast force-unlock [--redis URL] [--layout L] NAME...

Free lock NAME whoever holds it: delete the hold, raise its fence so that the old
holder's token is stale, and wake its waiters. The old holder learns at its next
renewal or its release (holdfast exec then stops its command, or exits 76 if the
command had already ended). For a stuck holder that is alive:
a dead holder's lock frees itself when its lease runs out.
` + "\n" + layoutHelp

// lockStatus is what `holdfast status` reports of one lock.
type lockStatus struct {
	Name    string   `json:"name"`
	Kind    string   `json:"kind"` // "" when free
	Holders []holder `json:"holders"`
	TTLms   int64    `json:"ttl_ms"` // 0 when free, -1 when the key has no expiry
	Fence   uint64   `json:"fence"`  // the fencing counter
	Waiters int      `json:"waiters"`
	Permits int      `json:"permits,omitempty"` // a semaphore's permit count
}

type holder struct {
	Owner string `json:"owner"` // as stored: CLIENTID:INSTANCE:OWNER, or ID:THREAD (redisson)
	Count int64  `json:"count"`
	Mode  string `json:"mode,omitempty"`
}

// opsArgs parses the options shared by status, list and force-unlock.
func opsArgs(name string, args []string, asJSON *bool) (target, []string, error) {
	fs := newFlagSet(name)
	addr := fs.String("redis", "", "")
	layout := fs.String("layout", "", "")
	if asJSON != nil {
		fs.BoolVar(asJSON, "json", false, "")
	}
	rest, err := parseArgs(fs, args)
	if err != nil {
		return target{}, nil, err
	}
	t, err := parseRedis(*addr)
	if err == nil {
		t.layout, err = parseLayout(*layout)
	}
	return t, rest, err
}

// opsClient connects to Redis and returns a Client to inspect with, and
// how to close both.
func opsClient(t target) (*holdfast.Client, func(), error) {
	rdb, err := connect(t)
	if err != nil {
		return nil, nil, err
	}
	c, err := holdfast.New(holdfast.Config{Redis: rdb, Layout: t.layout})
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	return c, func() { c.Close(); rdb.Close() }, nil
}

func checkNames(cmd string, names []string) error {
	if len(names) == 0 {
		return usageError{cmd + ": name at least one lock"}
	}
	for _, n := range names {
		if err := scripts.ValidateName(n); err != nil {
			return usageError{cmd + ": " + err.Error()}
		}
	}
	return nil
}

func statusMain(args []string, stdout, _ io.Writer) (int, error) {
	var asJSON bool
	t, names, err := opsArgs("status", args, &asJSON)
	if err != nil {
		return 0, err
	}
	if err := checkNames("status", names); err != nil {
		return 0, err
	}
	c, done, err := opsClient(t)
	if err != nil {
		return 0, err
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := make([]lockStatus, 0, len(names))
	for _, n := range names {
		info, err := c.Inspect(ctx, n)
		if err != nil {
			return 0, redisFailure("status", err)
		}
		out = append(out, statusOf(n, info))
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return 0, enc.Encode(out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "NAME\tKIND\tHOLDER (%s)\tCOUNT\tTTL\tFENCE\tWAITERS\n", holderShape(t.layout))
	for _, st := range out {
		kind, ttl := "free", "-"
		if st.Kind != "" {
			kind = st.Kind
			if st.Permits > 0 {
				kind = fmt.Sprintf("%s/%d", st.Kind, st.Permits)
			}
			ttl = "none"
			if st.TTLms >= 0 {
				ttl = (time.Duration(st.TTLms) * time.Millisecond).String()
			}
		}
		if len(st.Holders) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t%s\t%d\t%d\n", st.Name, kind, ttl, st.Fence, st.Waiters)
		}
		// One line per holder: a read-write lock may have many.
		for i, h := range st.Holders {
			owner := h.Owner
			if h.Mode != "" {
				owner += " (" + h.Mode + ")"
			}
			if i == 0 {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%d\n", st.Name, kind, owner, h.Count, ttl, st.Fence, st.Waiters)
			} else {
				fmt.Fprintf(tw, "\t\t%s\t%d\t\t\t\n", owner, h.Count)
			}
		}
	}
	return 0, tw.Flush()
}

// holderShape names the parts of a holder field as the layout stores it.
func holderShape(l holdfast.Layout) string {
	if l == holdfast.LayoutRedisson {
		return "ID:THREAD"
	}
	return "CLIENTID:INSTANCE:OWNER"
}

func statusOf(name string, info holdfast.Info) lockStatus {
	st := lockStatus{Name: name, Kind: info.Kind, Holders: []holder{}, Fence: info.Fence, Waiters: info.Waiters, Permits: info.Permits}
	for _, h := range info.Holders {
		st.Holders = append(st.Holders, holder{Owner: h.Owner, Count: h.Count, Mode: h.Mode})
	}
	switch {
	case info.TTL > 0:
		st.TTLms = info.TTL.Milliseconds()
	case info.TTL < 0:
		st.TTLms = -1
	}
	return st
}

func listMain(args []string, stdout, _ io.Writer) (int, error) {
	t, rest, err := opsArgs("list", args, nil)
	if err != nil {
		return 0, err
	}
	if len(rest) > 1 {
		return 0, usageError{fmt.Sprintf("list: one PATTERN at most, got %q", rest)}
	}
	pattern := "*"
	if len(rest) == 1 {
		pattern = rest[0]
	}
	c, done, err := opsClient(t)
	if err != nil {
		return 0, err
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	names, err := c.Names(ctx, pattern)
	if err != nil {
		return 0, redisFailure("list", err)
	}
	if len(names) > 0 {
		fmt.Fprintln(stdout, strings.Join(names, "\n"))
	}
	return 0, nil
}

func forceUnlockMain(args []string, stdout, _ io.Writer) (int, error) {
	t, names, err := opsArgs("force-unlock", args, nil)
	if err != nil {
		return 0, err
	}
	if err := checkNames("force-unlock", names); err != nil {
		return 0, err
	}
	c, done, err := opsClient(t)
	if err != nil {
		return 0, err
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range names {
		before, err := c.Inspect(ctx, n)
		if err == nil {
			err = c.ForceUnlock(ctx, n)
		}
		if err != nil {
			return 0, redisFailure("force-unlock "+n, err)
		}
		if before.Kind == "" {
			fmt.Fprintf(stdout, "%s: was free\n", n)
			continue
		}
		owners := make([]string, len(before.Holders))
		for i, h := range before.Holders {
			owners[i] = h.Owner
		}
		fmt.Fprintf(stdout, "%s: freed (was held by %s)\n", n, strings.Join(owners, ", "))
	}
	return 0, nil
}
