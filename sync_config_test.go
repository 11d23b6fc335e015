package holdfast_test

import (
	"errors"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/redistest"
)

// TestSyncConfigRefused: negative SyncReplicas or SyncTimeout are refused
// with ErrInvalidOption and no Client.
func TestSyncConfigRefused(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client(t)
	for _, cfg := range []holdfast.Config{
		{Redis: rc, SyncReplicas: -1},
		{Redis: rc, SyncReplicas: 1, SyncTimeout: -time.Second},
	} {
		c, err := holdfast.New(cfg)
		if !errors.Is(err, holdfast.ErrInvalidOption) || c != nil {
			t.Fatalf("New(%+v) = %v, %v; want ErrInvalidOption", cfg, c, err)
		}
	}
}
