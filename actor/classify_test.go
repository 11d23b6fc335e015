package actor

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/rueidis"

	"github.com/holdfast/holdfast/lockactor"
)

// The replies that retrying cannot fix, as Redis 7 words them (with and
// without the ERR code rueidis may drop), against those that may pass.
func TestPermanentReply(t *testing.T) {
	for _, tc := range []struct {
		reply     string
		permanent bool
	}{
		{"NOPERM this user has no permissions to run the 'evalsha' command", true},
		{"NOPERM this user has no permissions to access one of the keys used as arguments", true},
		{"ERR The user executing the script can't run this command or subcommand script: f3, on @user_script:44.", true},
		{"The user executing the script can't run this command or subcommand script: f3, on @user_script:44.", true},
		{"NOAUTH Authentication required.", true},
		{"WRONGPASS invalid username-password pair or user is disabled.", true},
		{"WRONGTYPE Operation against a key holding the wrong kind of value script: f3, on @user_script:22.", true},
		{"ERR unknown command 'evalsha', with args beginning with: ", true},
		{"ERR Unknown Redis command called from script script: 20, on @user_script:1.", true},
		{"ERR user_script:1: Script attempted to access nonexistent global variable 'x' script: c7, on @user_script:1.", true},
		{"ERR wrong number of arguments for 'evalsha' command", true},
		{"LOADING Redis is loading the dataset in memory", false},
		{"READONLY You can't write against a read only replica.", false},
		{"TRYAGAIN Multiple keys request during rehashing of slot", false},
		{"MOVED 3999 127.0.0.1:6381", false},
		{"BUSY Redis is busy running a script.", false},
		{"OOM command not allowed when used memory > 'maxmemory'.", false},
		{"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.", false},
		{"CLUSTERDOWN The cluster is down", false},
	} {
		if got := permanentReply(tc.reply); got != tc.permanent {
			t.Errorf("permanentReply(%q) = %v, want %v", tc.reply, got, tc.permanent)
		}
	}
}

func TestClassifyNonReplies(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want lockactor.Fault
	}{
		{nil, lockactor.NoFault},
		{rueidis.ErrClosing, lockactor.Transient},
		{context.DeadlineExceeded, lockactor.Ambiguous},
		{errors.New("read tcp 127.0.0.1:1: connection reset by peer"), lockactor.Ambiguous},
	} {
		if got := ClassifyRueidis(tc.err); got != tc.want {
			t.Errorf("ClassifyRueidis(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
