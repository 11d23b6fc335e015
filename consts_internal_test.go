package holdfast

import (
	"testing"

	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/scripts"
)

// TestExportedConstantsEqualTheMachinerys: the exported constants are
// declared with their literal values, so that go doc shows them; each must
// still equal the value the machinery uses.
func TestExportedConstantsEqualTheMachinerys(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"KindSemaphore", KindSemaphore, lockactor.SemaphoreName},
		{"KindElection", KindElection, scripts.ElectionKind},
		{"MaxValueLen", MaxValueLen, scripts.MaxValueLen},
		{"DefaultWaiterTimeout", DefaultWaiterTimeout, lockactor.DefaultWaiterTimeout},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, but the machinery uses %v", c.name, c.got, c.want)
		}
	}
}
