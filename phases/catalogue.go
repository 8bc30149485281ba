package phases

// The phases, the span names with their phase and category, and the attribute keys are declared
// in conventions.yaml, with the rollout categories; go generate writes generated_conventions.go
// (and the other packages', the page's and the docs' copies) from it.
//go:generate go run ../internal/conventions/gen -root ..

// Category is the kind of time a span stands for, where views tell kinds of time apart (the
// rollout Gantt's letters and colours, the critical path's shares).
type Category string

// CategoryNone is most spans' category: views need not tell their time apart.
const CategoryNone Category = ""

// SpanInfo is what the catalogue knows of one span name.
type SpanInfo struct {
	Name  string
	Phase string // the phase it lies under
	// Container: the span stands for one container (its name in AttrContainerName).
	Container bool
	Category  Category
}

var catalogueByName = func() map[string]SpanInfo {
	m := make(map[string]SpanInfo, len(Catalogue))
	for _, s := range Catalogue {
		m[s.Name] = s
	}
	return m
}()

// Catalogued returns what the catalogue knows of a span name; ok is false for the root, the phases
// and names it does not hold.
func Catalogued(name string) (SpanInfo, bool) {
	s, ok := catalogueByName[name]
	return s, ok
}

// IsContainerSpan reports whether a span stands for one container.
func IsContainerSpan(name string) bool { return catalogueByName[name].Container }

// CategoryOf is the kind of time a span stands for (CategoryNone for most).
func CategoryOf(name string) Category { return catalogueByName[name].Category }
