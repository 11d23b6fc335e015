package lockactor

import (
	"testing"

	"github.com/holdfast/holdfast/scripts"
)

// TestKindsMarkTheirBatches keeps the scripts' Batch marks and the kinds in
// step: observers count a renewal and log a failed one hold by hold from
// the mark alone, so a kind whose renewal script lacks it would renew
// unseen, and a script marked but renewing for no kind would be counted
// for nothing.
func TestKindsMarkTheirBatches(t *testing.T) {
	kinds := []*Kind{Reentrant, Fair, ReadWrite, Semaphore(3), Election, RedissonLock, RedissonRW}
	want := map[*scripts.Script]scripts.Batch{}
	for _, k := range kinds {
		if k.Renew == nil {
			t.Errorf("kind %s has no renewal script", k.Name)
			continue
		}
		want[k.Renew] = scripts.RenewBatch
		if k.KeepAlive != nil {
			want[k.KeepAlive] = scripts.KeepAliveBatch
		}
	}
	for _, s := range scripts.All() {
		if got := s.Batch; got != want[s] {
			t.Errorf("script %s: Batch = %d, want %d", s.Name, got, want[s])
		}
	}
}
