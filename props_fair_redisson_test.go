package holdfast_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redissontest"
	"github.com/holdfast/holdfast/scripts"
)

// TestFairLockPropertiesRedisson: the fair lock's properties (exclusion,
// validity, fencing, arrival order, liveness, nothing left) with the
// Redisson layout's scripts: Redisson's line, deadlines and per-waiter
// channels.
func TestFairLockPropertiesRedisson(t *testing.T) {
	fairProperties(t, holdfast.LayoutRedisson, func(f *fairWorld) {
		f.anonymous = redissonAnonymous
		f.settle = f.settleRedissonLine
	})
}

// redissonAnonymous: an anonymous Lock's Redisson field is ID:n with n
// below 2^62 (scripts.RedissonField).
func redissonAnonymous(field string) bool {
	i := strings.LastIndexByte(field, ':')
	n, err := strconv.ParseUint(field[i+1:], 10, 64)
	return err == nil && n < 1<<62
}

// settleRedissonLine: Redisson's line has no TTL; a place nobody keeps
// (one a failover brought back, or a give-up whose departure was lost)
// stays until a script looks at the head after its deadline. Looking
// (the wake script that ForceUnlock runs) as time passes must empty the
// line within the deadlines the places can have.
func (f *fairWorld) settleRedissonLine(t *rapid.T) {
	keys := scripts.RedissonFairWakeKeys("f")
	args := append([]string{"EVAL", scripts.RedissonFairWake, strconv.Itoa(len(keys))}, keys...)
	limit := f.w.Now().Add(time.Duration(2*len(f.locks)+2) * f.maxWT)
	for {
		if r := f.w.Primary().Do(args...); r.IsError() {
			t.Fatalf("wake script: %s", r.Str)
		}
		n := f.w.Primary().Do("EXISTS", redissontest.FairQueueKey("f"), redissontest.FairTimeoutKey("f")).Int
		if n == 0 {
			return
		}
		if f.w.Now().After(limit) {
			t.Fatalf("the line of f is still there: %s", f.w.Primary().Dump())
		}
		f.w.Advance(f.maxWT)
	}
}
