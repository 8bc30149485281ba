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
}

// internEntryBytes is what an entry costs besides its string: its map slot (with the map's
// spare room) and the entry itself.
const internEntryBytes = 96

// ref returns the canonical copy of s, and the bytes it added.
func (t *interner) ref(s string) (string, int64) {
	if e := t.m[s]; e != nil {
		e.refs++
		return e.s, 0
	}
	if t.m == nil {
		t.m = map[string]*internEntry{}
	}
	t.m[s] = &internEntry{s: s, refs: 1}
	n := int64(internEntryBytes + allocBytes(len(s)))
	t.bytes += n
	return s, n
}

// unref lets go of one reference to s, and returns the bytes freed.
func (t *interner) unref(s string) int64 {
	e := t.m[s]
	if e == nil {
		return 0
	}
	if e.refs--; e.refs > 0 {
		return 0
	}
	delete(t.m, s)
	n := int64(internEntryBytes + allocBytes(len(s)))
	t.bytes -= n
	return n
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
