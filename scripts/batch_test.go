package scripts_test

import (
	"testing"

	"github.com/holdfast/holdfast/scripts"
)

func TestLockName(t *testing.T) {
	for _, name := range []string{"a", "orders:{42}", "x}y"} {
		for _, key := range []string{scripts.LockKey(name), scripts.FairQueueKey(name), scripts.RWLeaseKey(name, "c:i:o:r")} {
			if got := scripts.RenewScript.LockName(key); got != name {
				t.Errorf("RenewScript.LockName(%q) = %q, want %q", key, got, name)
			}
		}
		// The Redisson layout keeps the lock hash at the name itself.
		for _, s := range []*scripts.Script{scripts.RedissonRenewScript, scripts.RedissonRWRenewScript, scripts.RedissonAcquireScript} {
			if got := s.LockName(name); got != name {
				t.Errorf("%s.LockName(%q) = %q, want the name itself", s.Name, name, got)
			}
		}
	}
}
