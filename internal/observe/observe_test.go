package observe

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/holdfast/holdfast/lockactor"
	"github.com/holdfast/holdfast/scripts"
)

func TestTransientErrorsLogOncePerNamePerSecond(t *testing.T) {
	var buf bytes.Buffer
	clk := clock.NewMock()
	o, err := New(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), nil, clk)
	if err != nil {
		t.Fatal(err)
	}
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	lines := func() int { return strings.Count(buf.String(), "\n") }
	for i := 0; i < 10; i++ {
		o.callFailed(scripts.AcquireScript, "a", "c:o", 0, lockactor.Ambiguous, refused)
		o.callFailed(scripts.AcquireScript, "b", "c:o", 0, lockactor.Transient, refused)
		clk.Add(90 * time.Millisecond)
	}
	if n := lines(); n != 2 {
		t.Fatalf("%d lines within 900ms for two names, want 2:\n%s", n, buf.String())
	}
	clk.Add(100 * time.Millisecond)
	o.callFailed(scripts.RenewScript, "a", "c:o", 0, lockactor.Ambiguous, refused)
	if n := lines(); n != 3 || !strings.Contains(buf.String(), "level=WARN") {
		t.Fatalf("after a second: %d lines, want 3 with the renewal's at Warn:\n%s", n, buf.String())
	}
	denied := errors.New("NOPERM this user has no permissions to run the 'evalsha' command")
	o.callFailed(scripts.AcquireScript, "a", "c:o", 0, lockactor.Permanent, denied)
	o.callFailed(scripts.AcquireScript, "a", "c:o", 0, lockactor.Permanent, denied)
	if n := strings.Count(buf.String(), "'evalsha'"); n != 2 {
		t.Fatalf("%d permanent refusals logged, want every one (2):\n%s", n, buf.String())
	}
	if len(o.lastLog) > 2 {
		t.Fatalf("%d names remembered, want at most the 2 seen", len(o.lastLog))
	}
}
