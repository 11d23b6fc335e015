package actor

import (
	"hash/maphash"
	"iter"
)

// registry is the System's table of entries by lock name: an open-addressed
// hash table of entry pointers keyed by the entries' own names, probed
// linearly. A slot is 9 bytes (the pointer and a tag byte), where a
// map[string]*entry slot is 24 (the name's header beside the pointer) plus
// the map's group overhead; with a hundred thousand holds that was about 33
// bytes a hold.
//
// The table is a power of two long. It doubles when an insert would take
// it past 13/16 full, and halves when a removal leaves it under 1/8 full
// (down to minRegistry slots), so the memory of a burst of names is given
// back when the burst ends; a Go map never shrinks. Removal shifts the
// entries after the removed one back (no tombstones), so a lookup ends at
// the first empty slot.
//
// Beside each slot is a byte of its entry's hash (tags): a probe reads an
// entry, a cache miss, only when that byte matches, so a lookup of a new
// name reads the two arrays and, about once in 256 slots passed, an entry.
//
// Growing or shrinking rehashes every entry at once, under System.mu: about
// 20 ms at 100,000 entries on a 2-core test machine, once per doubling.
//
// A registry is not safe for concurrent use: the System's are used under
// System.mu. Its zero value is an empty table.
type registry struct {
	slots []*entry
	tags  []uint8 // tags[i] is tagOf the hash of slots[i]'s name
	n     int     // entries in slots
	seed  maphash.Seed
	// hash, when set, replaces maphash for tests that need collisions.
	hash func(name string) uint64
}

// minRegistry is the fewest slots a registry that has held an entry keeps.
const minRegistry = 8

func (r *registry) hashOf(name string) uint64 {
	if r.hash != nil {
		return r.hash(name)
	}
	return maphash.String(r.seed, name)
}

// tagOf is the byte of hash h kept beside its slot: its top byte (the
// bottom bits choose the home slot).
func tagOf(h uint64) uint8 { return uint8(h >> 56) }

// len reports how many entries the table holds.
func (r *registry) len() int { return r.n }

// find returns the slot of name's entry, or -1.
func (r *registry) find(name string) int {
	if r.n == 0 {
		return -1
	}
	mask := len(r.slots) - 1
	h := r.hashOf(name)
	tag := tagOf(h)
	for i := int(h) & mask; ; i = (i + 1) & mask {
		e := r.slots[i]
		if e == nil {
			return -1
		}
		if r.tags[i] == tag && e.name == name {
			return i
		}
	}
}

// get returns the entry of name, or nil.
func (r *registry) get(name string) *entry {
	if i := r.find(name); i >= 0 {
		return r.slots[i]
	}
	return nil
}

// put adds e, whose name must not be in the table.
func (r *registry) put(e *entry) {
	if r.slots == nil {
		r.seed = maphash.MakeSeed()
		r.slots, r.tags = make([]*entry, minRegistry), make([]uint8, minRegistry)
	} else if (r.n+1)*16 > len(r.slots)*13 {
		r.resize(len(r.slots) * 2)
	}
	r.place(e)
	r.n++
}

// place puts e in the first empty slot from its home slot on.
func (r *registry) place(e *entry) {
	mask := len(r.slots) - 1
	h := r.hashOf(e.name)
	i := int(h) & mask
	for r.slots[i] != nil {
		i = (i + 1) & mask
	}
	r.slots[i], r.tags[i] = e, tagOf(h)
}

// remove takes e out of the table, if it is there, and reports whether it
// was.
func (r *registry) remove(e *entry) bool {
	i := r.find(e.name)
	if i < 0 || r.slots[i] != e {
		return false
	}
	r.removeAt(i)
	return true
}

// removeAt empties slot i and shifts back the entries of the run after it
// that may move, so that every entry stays reachable from its home slot
// through full slots.
func (r *registry) removeAt(i int) {
	mask := len(r.slots) - 1
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		e := r.slots[j]
		if e == nil {
			break
		}
		// e stays if its home is cyclically in (i, j]: the hole at i is
		// not on its path.
		home := int(r.hashOf(e.name)) & mask
		if i <= j {
			if i < home && home <= j {
				continue
			}
		} else if i < home || home <= j {
			continue
		}
		r.slots[i], r.tags[i] = e, r.tags[j]
		i = j
	}
	r.slots[i], r.tags[i] = nil, 0
	r.n--
	if r.n*8 < len(r.slots) && len(r.slots) > minRegistry {
		r.resize(len(r.slots) / 2)
	}
}

// resize moves the entries into a new table of size slots.
func (r *registry) resize(size int) {
	old := r.slots
	r.slots, r.tags = make([]*entry, size), make([]uint8, size)
	for _, e := range old {
		if e != nil {
			r.place(e)
		}
	}
}

// all yields every entry. The table must not change during the iteration:
// an entry added or removed could be yielded twice or missed. It panics if
// the count or the size of the table changed.
func (r *registry) all() iter.Seq[*entry] {
	return func(yield func(*entry) bool) {
		slots, n := r.slots, r.n
		for _, e := range slots {
			if e == nil {
				continue
			}
			if !yield(e) {
				return
			}
			if r.n != n || len(r.slots) != len(slots) {
				panic("actor: registry changed during iteration")
			}
		}
	}
}
