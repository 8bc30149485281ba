package phases

// Row is one line of a view of a trace drawn as a tree: a span's index in the trace, and its
// depth below the root.
type Row struct{ Index, Depth int }

// TreeOrder lists the spans with each one's children right beneath it, siblings in the trace's
// order (start order), so that a span stands under its parent even where it starts before
// spans of another branch: a component's span joined into the trace (Join) may begin before
// the phase it belongs to was drawn, or, from a clock that is behind, before the Pod was
// created. A span whose parent is not in the trace follows, one level below the root. Every
// view that indents spans by their depth lists them in this order.
func TreeOrder(spans []Span) []Row {
	if len(spans) == 0 {
		return nil
	}
	children := map[SpanID][]int{}
	index := make(map[SpanID]int, len(spans))
	for i := range spans {
		index[spans[i].SpanID] = i
	}
	for i := 1; i < len(spans); i++ {
		children[spans[i].ParentSpanID] = append(children[spans[i].ParentSpanID], i)
	}
	out := make([]Row, 0, len(spans))
	seen := make([]bool, len(spans))
	var visit func(i, d int)
	visit = func(i, d int) {
		if seen[i] {
			return // a cycle in the parents ends here
		}
		seen[i] = true
		out = append(out, Row{i, d})
		for _, c := range children[spans[i].SpanID] {
			visit(c, d+1)
		}
	}
	visit(0, 0)
	for i := 1; i < len(spans); i++ {
		if !seen[i] {
			if _, ok := index[spans[i].ParentSpanID]; !ok {
				visit(i, 1)
			}
		}
	}
	for i := 1; i < len(spans); i++ { // what only a cycle holds
		if !seen[i] {
			visit(i, 1)
		}
	}
	return out
}
