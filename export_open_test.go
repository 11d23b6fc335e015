package holdfast

import "github.com/redis/rueidis"

// RedisOf returns the rueidis client c calls Redis through: for a Client
// from Open, the one it dialled.
func RedisOf(c *Client) rueidis.Client { return c.cfg.Redis }
