package lockactor

import (
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// recycle reuses an owner or a request once reaches and reachesOwner say
// that nothing of the machine points at it. Those two functions list by
// hand every place that may hold such a pointer; the tests below keep the
// list complete: a new field that can hold an owner or a request fails
// TestReachesCoversEveryPointerField until it is covered (or its exclusion
// is explained here), and every step of the driver checks that a spare is
// reachable from nothing live (checkSparesUnreachable).

// reachCoverage names every field, as a path from the machine's types,
// whose type can hold an *owner or a *request, with where recycle accounts
// for it.
var reachCoverage = map[string]string{
	"Machine.reqs":       "reaches and reachesOwner: live requests",
	"Machine.queue":      "reaches and reachesOwner: queued requests",
	"Machine.parked":     "reaches and reachesOwner: parked requests",
	"Machine.owners":     "reachesOwner; reaches looks into each owner",
	"Machine.att":        "the attempt: see Machine.att.req",
	"Machine.att.req":    "reaches and reachesOwner: the attempt's request",
	"Machine.env":        "see Machine.env.args",
	"Machine.env.args":   "points into an owner's releaseArgs only while a Release call is built; a call that faulted may run later with those arguments, and then faulted keeps every owner from reuse",
	"Machine.dropped":    "recycle's input: the owner a step dropped",
	"Machine.spare":      "recycle's output: nothing live may reach it",
	"Machine.droppedReq": "recycle's input: the request a step ended",
	"Machine.spareReq":   "recycle's output: nothing live may reach it",
	"owner.held":         "reaches: an owner's holders",
	"owner.waiting":      "reaches: an owner's waiting reentries and releases",
	"owner.op":           "an owner's op slot: see owner.op.req",
	"owner.op.req":       "reaches: the request of an owner's op",
	"owner.heldBuf":      "backing array of owner.held, read only through it",
	"owner.waitBuf":      "backing array of owner.waiting, read only through it",
	"request.owner":      "reachesOwner: the owner named by a live, queued or parked request or the attempt's",
}

// targets are the types recycle reuses, and a pointer that may point into
// an owner (its releaseArgs).
var (
	ownerPtr    = reflect.TypeOf((*owner)(nil))
	requestPtr  = reflect.TypeOf((*request)(nil))
	callArgsPtr = reflect.TypeOf((*callArgs)(nil))
)

// pointerFields lists the paths of the fields of t (a struct of this
// package) that hold an *owner or a *request, directly or through slices,
// arrays, maps and nested structs of this package.
func pointerFields(root string, t reflect.Type) []string {
	var out []string
	var walk func(path string, t reflect.Type, seen map[reflect.Type]bool) bool
	walk = func(path string, t reflect.Type, seen map[reflect.Type]bool) bool {
		switch t.Kind() {
		case reflect.Pointer:
			if t == ownerPtr || t == requestPtr || t == callArgsPtr {
				return true
			}
			return walk(path, t.Elem(), seen)
		case reflect.Slice, reflect.Array:
			return walk(path, t.Elem(), seen)
		case reflect.Map:
			k := walk(path, t.Key(), seen)
			return walk(path, t.Elem(), seen) || k
		case reflect.Struct:
			if t.PkgPath() != ownerPtr.Elem().PkgPath() || seen[t] {
				return false
			}
			if t == ownerPtr.Elem() || t == requestPtr.Elem() {
				return false // walked as roots of their own
			}
			seen[t] = true
			defer delete(seen, t)
			any := false
			for i := range t.NumField() {
				f := t.Field(i)
				p := path + "." + f.Name
				if walk(p, f.Type, seen) {
					out = append(out, p)
					any = true
				}
			}
			return any
		}
		return false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		p := root + "." + f.Name
		if walk(p, f.Type, map[reflect.Type]bool{t: true}) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func TestReachesCoversEveryPointerField(t *testing.T) {
	var found []string
	found = append(found, pointerFields("Machine", reflect.TypeOf(Machine{}))...)
	found = append(found, pointerFields("owner", reflect.TypeOf(owner{}))...)
	found = append(found, pointerFields("request", reflect.TypeOf(request{}))...)
	if len(found) == 0 {
		t.Fatal("the walk found no field at all: it is broken")
	}
	for _, p := range found {
		if _, ok := reachCoverage[p]; !ok {
			t.Errorf("%s can hold an *owner or a *request and neither reaches nor reachesOwner accounts for it: cover it there (recycle would reuse what it points at) and list it in reachCoverage", p)
		}
	}
	// Entries for paths that hold no such pointer must name real
	// fields: a renamed field would leave its entry, and its coverage,
	// behind.
	for p := range reachCoverage {
		if !fieldExists(p) {
			t.Errorf("reachCoverage names %s, which is no field: update the list", p)
		}
	}
}

// fieldExists reports whether a path like "Machine.att.req" names a field.
func fieldExists(path string) bool {
	parts := strings.Split(path, ".")
	roots := map[string]reflect.Type{
		"Machine": reflect.TypeOf(Machine{}),
		"owner":   reflect.TypeOf(owner{}),
		"request": reflect.TypeOf(request{}),
	}
	t, ok := roots[parts[0]]
	if !ok {
		return false
	}
	for _, name := range parts[1:] {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return false
		}
		f, ok := t.FieldByName(name)
		if !ok {
			return false
		}
		t = f.Type
	}
	return true
}

// TestPointerFieldsSeesANewField proves the walk finds fields it must:
// a struct of this package with an owner behind a slice, a map and a
// nested struct.
func TestPointerFieldsSeesANewField(t *testing.T) {
	type nested struct{ o *owner }
	type probe struct {
		a []*request
		b map[string]*owner
		c nested
		d string
		e [2]*request
	}
	got := pointerFields("probe", reflect.TypeOf(probe{}))
	want := []string{"probe.a", "probe.b", "probe.c", "probe.c.o", "probe.e"}
	if !slices.Equal(got, want) {
		t.Fatalf("pointerFields = %v, want %v", got, want)
	}
}

// reachable collects every owner and request reachable from the live
// state of m: everything but the recycling fields themselves and the
// backing arrays of an owner's slices, which are read only through them.
func reachable(m *Machine) map[uintptr]bool {
	seen := map[uintptr]bool{}
	skip := map[string]bool{
		"Machine.dropped": true, "Machine.spare": true,
		"Machine.droppedReq": true, "Machine.spareReq": true,
		"owner.heldBuf": true, "owner.waitBuf": true,
	}
	var walk func(structName string, v reflect.Value)
	walk = func(structName string, v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				return
			}
			if v.Type() == ownerPtr || v.Type() == requestPtr {
				if seen[v.Pointer()] {
					return
				}
				seen[v.Pointer()] = true
			}
			walk(structName, v.Elem())
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(structName, v.Index(i))
			}
		case reflect.Map:
			it := v.MapRange()
			for it.Next() {
				walk(structName, it.Key())
				walk(structName, it.Value())
			}
		case reflect.Struct:
			t := v.Type()
			if t.PkgPath() != ownerPtr.Elem().PkgPath() {
				return
			}
			name := t.Name()
			for i := range t.NumField() {
				if skip[name+"."+t.Field(i).Name] {
					continue
				}
				walk(name, v.Field(i))
			}
		}
	}
	walk("", reflect.ValueOf(m))
	return seen
}

// checkSparesUnreachable fails t when a spare that recycle kept for reuse
// is still reachable from the machine's live state: reusing it would
// change a live owner or request under its holder.
func checkSparesUnreachable(t testing.TB, m *Machine) {
	t.Helper()
	if m.spare == nil && m.spareReq == nil {
		return
	}
	live := reachable(m)
	if m.spare != nil && live[reflect.ValueOf(m.spare).Pointer()] {
		t.Fatalf("recycle kept an owner as spare that the machine still reaches")
	}
	if m.spareReq != nil && live[reflect.ValueOf(m.spareReq).Pointer()] {
		t.Fatalf("recycle kept a request as spare that the machine still reaches")
	}
}

// TestCheckSparesUnreachableCatchesALiveSpare proves the check can fail:
// a machine whose spare is also one of its owners, or whose spare request
// is queued, is caught.
func TestCheckSparesUnreachableCatchesALiveSpare(t *testing.T) {
	d := newDriver(t)
	d.enqueue(1, "c:a", -1)
	if len(d.m.reqs) == 0 {
		t.Fatal("no live request after an enqueue")
	}
	m := *d.m
	m.spareReq = d.m.reqs[0]
	if !reachable(&m)[reflect.ValueOf(m.spareReq).Pointer()] {
		t.Fatal("a live request is not found reachable")
	}
	o := &owner{}
	m.owners = append(slices.Clone(m.owners), o)
	m.spare = o
	if !reachable(&m)[reflect.ValueOf(o).Pointer()] {
		t.Fatal("an owner of the machine is not found reachable")
	}
	r := &request{owner: &owner{}}
	m.queue = append(slices.Clone(m.queue), r)
	m.spare = r.owner
	if !reachable(&m)[reflect.ValueOf(r.owner).Pointer()] {
		t.Fatal("an owner named by a queued request is not found reachable")
	}
}
