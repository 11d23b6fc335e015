package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/scripts"
)

// lockStatus is what `holdfast status` reports of one lock.
type lockStatus struct {
	Name    string         `json:"name"`
	Held    bool           `json:"held"`
	Holders map[string]int `json:"holders"` // owner field -> reentry count
	TTLms   int64          `json:"ttl_ms"`  // -2: no key; -1: no TTL
	Fence   int64          `json:"fence"`   // last fencing token handed out
	Waiters int64          `json:"waiting_clients"`
}

func statusMain(args []string, stdout io.Writer) (int, error) {
	fs := newFlagSet("status")
	addr := fs.String("redis", "", "Redis address")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return exitUsage, err
	}
	names := fs.Args()
	if len(names) == 0 {
		return exitUsage, usageError{"status: name at least one lock"}
	}
	for _, n := range names {
		if err := scripts.ValidateName(n); err != nil {
			return exitUsage, usageError{err.Error()}
		}
	}
	rdb, err := connect(redisAddr(*addr))
	if err != nil {
		return exitUsage, err
	}
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []lockStatus
	for _, n := range names {
		st, err := readStatus(ctx, rdb, n)
		if err != nil {
			return 1, err
		}
		out = append(out, st)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return 0, enc.Encode(out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tHOLDER (CLIENT:OWNER)\tCOUNT\tTTL\tFENCE\tWAITING CLIENTS")
	for _, st := range out {
		state, holder, count, ttl := "free", "-", "-", "-"
		if st.Held {
			state = "held"
			var hs, cs []string
			for h, c := range st.Holders {
				hs = append(hs, h)
				cs = append(cs, fmt.Sprint(c))
			}
			holder, count = strings.Join(hs, ","), strings.Join(cs, ",")
			switch {
			case st.TTLms >= 0:
				ttl = (time.Duration(st.TTLms) * time.Millisecond).String()
			case st.TTLms == -1:
				ttl = "none"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\n", st.Name, state, holder, count, ttl, st.Fence, st.Waiters)
	}
	return 0, tw.Flush()
}

func readStatus(ctx context.Context, rdb rueidis.Client, name string) (lockStatus, error) {
	key := scripts.LockKey(name)
	res := rdb.DoMulti(ctx,
		rdb.B().Hgetall().Key(key).Build(),
		rdb.B().Pttl().Key(key).Build(),
		rdb.B().Get().Key(scripts.FenceKey(name)).Build(),
		rdb.B().PubsubNumsub().Channel(scripts.Channel(name)).Build(),
	)
	st := lockStatus{Name: name, Holders: map[string]int{}}
	fields, err := res[0].AsIntMap()
	if err != nil {
		return st, fmt.Errorf("status %s: %v", name, err)
	}
	keys := make([]string, 0, len(fields))
	for f := range fields {
		keys = append(keys, f)
	}
	sort.Strings(keys)
	for _, f := range keys {
		st.Holders[f] = int(fields[f])
	}
	st.Held = len(fields) > 0
	if st.TTLms, err = res[1].AsInt64(); err != nil {
		return st, fmt.Errorf("status %s: %v", name, err)
	}
	if st.Fence, err = res[2].AsInt64(); err != nil && !rueidis.IsRedisNil(err) {
		return st, fmt.Errorf("status %s: %v", name, err)
	}
	if counts, err := res[3].AsIntMap(); err == nil {
		st.Waiters = counts[scripts.Channel(name)]
	}
	return st, nil
}
