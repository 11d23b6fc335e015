package actor

import "testing"

func TestSmallMap(t *testing.T) {
	var m smallMap[string, int]
	if _, ok := m.get("a"); ok {
		t.Fatal("empty map has a")
	}
	m.set("a", 1)
	m.set("b", 2)
	m.set("a", 3)
	if v, ok := m.get("a"); !ok || v != 3 || m.len() != 2 {
		t.Fatalf("a = %d, %v; len %d", v, ok, m.len())
	}
	m.del("a")
	m.del("zz")
	if _, ok := m.get("a"); ok || m.len() != 1 {
		t.Fatal("a not deleted")
	}
	if v, _ := m.get("b"); v != 2 {
		t.Fatalf("b = %d after deleting a", v)
	}
	m.reset()
	if m.len() != 0 {
		t.Fatal("reset left entries")
	}
}
