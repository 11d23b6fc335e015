package actor

// smallMap is a map for the few entries one actor keeps (its requests'
// handles, its timers, its owner fields): a slice searched linearly, which
// takes a fraction of the memory of a Go map when a client holds a hundred
// thousand locks with one or two entries each.
type smallMap[K comparable, V any] struct {
	entries []smallEntry[K, V]
}

type smallEntry[K comparable, V any] struct {
	key K
	val V
}

func (m *smallMap[K, V]) get(k K) (V, bool) {
	for _, e := range m.entries {
		if e.key == k {
			return e.val, true
		}
	}
	var zero V
	return zero, false
}

func (m *smallMap[K, V]) set(k K, v V) {
	for i := range m.entries {
		if m.entries[i].key == k {
			m.entries[i].val = v
			return
		}
	}
	m.entries = append(m.entries, smallEntry[K, V]{k, v})
}

func (m *smallMap[K, V]) del(k K) {
	for i, e := range m.entries {
		if e.key == k {
			last := len(m.entries) - 1
			m.entries[i] = m.entries[last]
			m.entries[last] = smallEntry[K, V]{}
			m.entries = m.entries[:last]
			return
		}
	}
}

func (m *smallMap[K, V]) len() int { return len(m.entries) }

// reset empties the map and lets its storage go.
func (m *smallMap[K, V]) reset() { m.entries = nil }

// empty empties the map and keeps its storage, for a map filled again soon
// (an actor's owner fields, emptied at each idle moment).
func (m *smallMap[K, V]) empty() {
	clear(m.entries)
	m.entries = m.entries[:0]
}
