package otlpin

// interner holds one copy of each string the held spans repeat (attribute keys, short values,
// span names), counted so that what it holds is charged to the store's byte bound and freed
// when the last span holding it goes: a sender of ever new strings fills the bound, not the
// heap.
type interner struct {
	m     map[string]*internEntry
	bytes int64
}

type internEntry struct {
	s    string
	refs int
	// owner is the authenticated sender whose span brought the string first: it is charged
	// for it until the last holder lets go, so that a sender of ever new strings is the one
	// the store's eviction finds greedy.
	owner *senderHeld
}

// internEntryBytes is what an entry costs besides its string: its map slot (with the map's
// spare room) and the entry itself.
const internEntryBytes = 96

// ref returns the canonical copy of s; a new string is charged to owner (nil: nobody).
func (t *interner) ref(s string, owner *senderHeld) string {
	if e := t.m[s]; e != nil {
		e.refs++
		return e.s
	}
	if t.m == nil {
		t.m = map[string]*internEntry{}
	}
	t.m[s] = &internEntry{s: s, refs: 1, owner: owner}
	n := int64(internEntryBytes + allocBytes(len(s)))
	t.bytes += n
	if owner != nil {
		owner.bytes += n
	}
	return s
}

// unref lets go of one reference to s; the last frees it, and its owner's charge.
func (t *interner) unref(s string) {
	e := t.m[s]
	if e == nil {
		return
	}
	if e.refs--; e.refs > 0 {
		return
	}
	delete(t.m, s)
	n := int64(internEntryBytes + allocBytes(len(s)))
	t.bytes -= n
	if e.owner != nil {
		e.owner.bytes -= n
	}
}

// allocBytes is what the Go allocator takes for n bytes: its size classes, roughly.
func allocBytes(n int) int {
	switch {
	case n == 0:
		return 0
	case n <= 16:
		return (n + 7) &^ 7
	case n <= 128:
		return (n + 15) &^ 15
	case n <= 256:
		return (n + 31) &^ 31
	case n <= 1024:
		return (n + 127) &^ 127
	}
	return (n + 1023) &^ 1023
}
