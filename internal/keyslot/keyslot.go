// Package keyslot computes Redis Cluster hash slots. It is the one copy of
// the CRC16 that packages scripts (key layout) and pubsub (sharded
// channels) both need.
package keyslot

import "strings"

// Count is the number of Redis Cluster hash slots.
const Count = 16384

// Of is the hash slot of a key or channel: the CRC16 (XMODEM) of its hash
// tag — the text between the first '{' and the next '}', when not empty —
// or of the whole key, mod Count.
func Of(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % Count
}
