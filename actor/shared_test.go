package actor

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// The first System's join makes the process's protoactor system, later
// joins share it, and the last leave shuts it down; the next join makes a
// fresh one.
func TestSharedSystemIsRefcounted(t *testing.T) {
	a, b := slog.New(slog.DiscardHandler), slog.New(slog.DiscardHandler)
	as1 := joinShared(a)
	if as2 := joinShared(b); as2 != as1 {
		t.Fatal("a second join made a second protoactor system")
	}
	leaveShared(a)
	if as1.IsStopped() {
		t.Fatal("the system stopped while a System still uses it")
	}
	leaveShared(b)
	if !as1.IsStopped() {
		t.Fatal("the system did not stop when its last System left")
	}
	as3 := joinShared(a)
	defer leaveShared(a)
	if as3 == as1 || as3.IsStopped() {
		t.Fatal("a join after the last leave did not make a fresh system")
	}
}

// protoactor's records reach the Logger of every System using the shared
// system, tagged lib=protoactor, and stop reaching a System's Logger when
// it leaves.
func TestSharedSystemLogsToEverySystem(t *testing.T) {
	var bufA, bufB bytes.Buffer
	a := slog.New(slog.NewTextHandler(&bufA, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b := slog.New(slog.NewTextHandler(&bufB, nil)) // Info and up
	as := joinShared(a)
	joinShared(b)
	as.Logger().With("k", "v").WithGroup("g").Info("hello", "x", 1)
	as.Logger().Debug("quiet")
	leaveShared(b)
	as.Logger().Info("after")
	leaveShared(a)

	for _, want := range []string{"msg=hello lib=protoactor k=v g.x=1", "quiet", "after"} {
		if !strings.Contains(bufA.String(), want) {
			t.Errorf("first logger lacks %q:\n%s", want, bufA.String())
		}
	}
	if !strings.Contains(bufB.String(), "msg=hello lib=protoactor k=v g.x=1") {
		t.Errorf("second logger lacks the shared record:\n%s", bufB.String())
	}
	for _, unwanted := range []string{"quiet", "after"} {
		if strings.Contains(bufB.String(), unwanted) {
			t.Errorf("second logger got %q (below its level, or after it left):\n%s", unwanted, bufB.String())
		}
	}
}

// A lock actor's id is its lock name, '$' and protoactor's sequence
// number; the name comes back whole whatever it contains, '$' included.
func TestLockActorNameFromID(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	as := joinShared(logger)
	defer leaveShared(logger)
	for _, name := range []string{"a", "orders/42", "$", "x$1", "a$b$c", "ünï"} {
		id := name + as.ProcessRegistry.NextId()
		if got := lockActorName(id); got != name {
			t.Errorf("lockActorName(%q) = %q, want %q", id, got, name)
		}
	}
}
