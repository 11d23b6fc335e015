package scripts

import "strings"

// publishCall is how every script announces on a channel.
const publishCall = "redis.call('publish', "

// Sharded returns the variant of a script's source for Redis Cluster: its
// PUBLISH calls become SPUBLISH, so a release reaches only the shard of its
// lock (where waiters SSUBSCRIBE, see package pubsub) instead of being
// broadcast to every node. Every channel shares its lock's hash tag, so
// SPUBLISH is legal inside the script. The .lua files stay the one source:
// the simulator and standalone Redis run them as written.
func Sharded(src string) string {
	return strings.ReplaceAll(src, publishCall, "redis.call('spublish', ")
}
