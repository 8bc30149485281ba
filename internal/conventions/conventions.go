// Package conventions reads phases/conventions.yaml, where readyspan's phases, span names,
// attribute keys and rollout categories are declared once, and generates from it what other
// packages, the page and the docs hold of them (Generate). go generate ./phases runs it
// (conventions/gen); its test fails when a generated file differs from what the YAML gives, so
// the YAML is the one place to change them. The model is the OpenTelemetry Collector's
// metadata.yaml and mdatagen.
package conventions

import (
	"fmt"
	"go/token"
	"regexp"
	"unicode/utf8"

	"sigs.k8s.io/yaml"
)

// File is phases/conventions.yaml; its comments say what each field means.
type File struct {
	Phases         []Phase        `json:"phases"`
	SpanCategories []SpanCategory `json:"span_categories"`
	Spans          []Span         `json:"spans"`
	ComponentSpans []Span         `json:"component_spans"`
	Categories     []Category     `json:"categories"`
	Marks          []Category     `json:"marks"`
	Legends        Legends        `json:"legends"`
	// Attributes are a Pod trace's (phases); RolloutAttributes those only a rollout's trace
	// has (rollout).
	Attributes        []Attribute `json:"attributes"`
	RolloutAttributes []Attribute `json:"rollout_attributes"`
}

// Attribute is one attribute key.
type Attribute struct {
	Key string `json:"key"`
	Go  string `json:"go"`
	Doc string `json:"doc"`
}

// Phase is one phase of a Pod's startup.
type Phase struct {
	Name string `json:"name"`
	Go   string `json:"go"`
}

// SpanCategory is a kind of time a span may stand for (phases.Category).
type SpanCategory struct {
	Name string `json:"name"`
	Go   string `json:"go"`
	Doc  string `json:"doc"`
}

// Span is one catalogued span name.
type Span struct {
	Name      string `json:"name"`
	Go        string `json:"go"`
	Phase     string `json:"phase"`
	Doc       string `json:"doc"`
	Container bool   `json:"container"`
	Category  string `json:"category"`
}

// Category is a rollout category of critical-path time, or a mark of the rollout Gantt (which
// has neither Words nor Doc).
type Category struct {
	Name       string  `json:"name"`
	Words      string  `json:"words"`
	Doc        string  `json:"doc"`
	Letter     string  `json:"letter"`
	Legend     string  `json:"legend"`
	Page       string  `json:"page"`
	Label      string  `json:"label"`
	Colour     *Colour `json:"colour"`
	Background *Colour `json:"background"`
}

// PageClass is the page's CSS class of the category: c-<PageClass>.
func (c Category) PageClass() string {
	if c.Page != "" {
		return c.Page
	}
	return c.Name
}

// Colour is one colour of the page, for its light scheme and, where it differs, its dark one.
type Colour struct {
	Light string `json:"light"`
	Dark  string `json:"dark"`
}

// Legends are the orders the rollout Gantt's legends list categories and marks in.
type Legends struct {
	Terminal []string `json:"terminal"`
	Page     []string `json:"page"`
}

// Parse reads the YAML strictly (an unknown field is an error: a misspelt key would otherwise
// be dropped without a word) and checks it.
func Parse(data []byte) (*File, error) {
	var f File
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("read conventions: %w", err)
	}
	if err := f.check(); err != nil {
		return nil, fmt.Errorf("check conventions: %w", err)
	}
	return &f, nil
}

var (
	// hexColour is what the page's stylesheet takes as a colour: the file's values go into it
	// as they are.
	hexColour = regexp.MustCompile(`^#[0-9a-f]{6}$`)
	// cssName is a category's name or class as the page's classes and its script's strings hold
	// it: nothing to escape in either.
	cssName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	// spanName is a span name as the catalogue holds them.
	spanName = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)
	// attrKey is an attribute key, or a prefix of keys (ending in a dot).
	attrKey = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*\.?$`)
)

// check refuses a file that would generate wrong or clashing code, a step at a time.
func (f *File) check() error {
	c := checker{idents: map[string]bool{}, keys: map[string]bool{}, byName: map[string]Category{}}
	for _, step := range []func(*File) error{c.phasesAndSpans, c.categories, c.attributes, c.legends} {
		if err := step(f); err != nil {
			return err
		}
	}
	return nil
}

// checker is what check's steps learn and the later ones use.
type checker struct {
	idents map[string]bool     // phases' Go identifiers
	keys   map[string]bool     // attribute keys, of both lists
	byName map[string]Category // categories and marks
}

func (c *checker) ident(what, id string) error {
	if !token.IsIdentifier(id) || !token.IsExported(id) {
		return fmt.Errorf("%s: go %q is not an exported Go identifier", what, id)
	}
	if c.idents[id] {
		return fmt.Errorf("%s: go %q declared twice", what, id)
	}
	c.idents[id] = true
	return nil
}

// names checks a list of lowercase names with their identifiers and returns them as a set.
func (c *checker) names(what string, list []struct{ name, goName string }) (map[string]bool, error) {
	set := map[string]bool{}
	for _, n := range list {
		if err := c.ident(what+" "+n.name, n.goName); err != nil {
			return nil, err
		}
		if !cssName.MatchString(n.name) || set[n.name] {
			return nil, fmt.Errorf("%s %q: not a lowercase name, or declared twice", what, n.name)
		}
		set[n.name] = true
	}
	return set, nil
}

func (c *checker) phasesAndSpans(f *File) error {
	var ps, cs []struct{ name, goName string }
	for _, p := range f.Phases {
		ps = append(ps, struct{ name, goName string }{p.Name, p.Go})
	}
	for _, sc := range f.SpanCategories {
		cs = append(cs, struct{ name, goName string }{sc.Name, sc.Go})
	}
	phases, err := c.names("phase", ps)
	if err != nil {
		return err
	}
	spanCats, err := c.names("span category", cs)
	if err != nil {
		return err
	}
	names := map[string]bool{}
	for _, s := range append(append([]Span(nil), f.Spans...), f.ComponentSpans...) {
		if err := c.ident("span "+s.Name, s.Go); err != nil {
			return err
		}
		switch {
		case !spanName.MatchString(s.Name) || names[s.Name] || phases[s.Name]:
			return fmt.Errorf("span %q: not a span name, declared twice, or a phase's name", s.Name)
		case !phases[s.Phase]:
			return fmt.Errorf("span %q: phase %q is not one of phases", s.Name, s.Phase)
		case s.Category != "" && !spanCats[s.Category]:
			return fmt.Errorf("span %q: category %q is not one of span_categories", s.Name, s.Category)
		case s.Doc == "":
			return fmt.Errorf("span %q: no doc", s.Name)
		}
		names[s.Name] = true
	}
	return nil
}

func (c *checker) categories(f *File) error {
	if len(f.Categories) == 0 {
		return fmt.Errorf("no categories")
	}
	letters, classes := map[string]string{}, map[string]string{}
	for i, cat := range append(append([]Category(nil), f.Categories...), f.Marks...) {
		if _, dup := c.byName[cat.Name]; dup {
			return fmt.Errorf("category %q declared twice", cat.Name)
		}
		c.byName[cat.Name] = cat
		if err := checkCategory(cat, i < len(f.Categories)); err != nil {
			return err
		}
		if cat.Letter != "" {
			if other, dup := letters[cat.Letter]; dup {
				return fmt.Errorf("categories %q and %q share the letter %q", other, cat.Name, cat.Letter)
			}
			letters[cat.Letter] = cat.Name
		}
		if other, dup := classes[cat.PageClass()]; dup {
			return fmt.Errorf("categories %q and %q share the page class %q", other, cat.Name, cat.PageClass())
		}
		classes[cat.PageClass()] = cat.Name
	}
	return nil
}

// checkCategory checks one category (isCategory) or mark on its own.
func checkCategory(c Category, isCategory bool) error {
	if !cssName.MatchString(c.Name) || !cssName.MatchString(c.PageClass()) {
		return fmt.Errorf("category %q: name or page class %q is not a lowercase name", c.Name, c.PageClass())
	}
	if isCategory != (c.Words != "" && c.Doc != "") {
		return fmt.Errorf("category %q: a category has words and doc, a mark neither", c.Name)
	}
	if c.Label == "" {
		return fmt.Errorf("category %q: no label for the page's legend", c.Name)
	}
	if c.Letter != "" && (utf8.RuneCountInString(c.Letter) != 1 || c.Letter == " " || c.Legend == "") {
		return fmt.Errorf("category %q: letter %q is not one printable character with legend words", c.Name, c.Letter)
	}
	for _, col := range []*Colour{c.Colour, c.Background} {
		if col != nil && (!hexColour.MatchString(col.Light) || (col.Dark != "" && !hexColour.MatchString(col.Dark))) {
			return fmt.Errorf("category %q: colour %+v is not #rrggbb in lowercase", c.Name, *col)
		}
	}
	return nil
}

// attributes checks both lists of keys: a rollout's trace uses the Pod trace's keys through
// phases, so a key is declared once, in either list; the rollout's identifiers are its own.
func (c *checker) attributes(f *File) error {
	if err := c.attributeList(f.Attributes, c.ident); err != nil {
		return err
	}
	rolloutIdents := map[string]bool{}
	return c.attributeList(f.RolloutAttributes, func(what, id string) error {
		if !token.IsIdentifier(id) || !token.IsExported(id) || rolloutIdents[id] {
			return fmt.Errorf("%s: go %q is not an exported Go identifier, or declared twice", what, id)
		}
		rolloutIdents[id] = true
		return nil
	})
}

func (c *checker) attributeList(list []Attribute, ident func(what, id string) error) error {
	for _, a := range list {
		if err := ident("attribute "+a.Key, a.Go); err != nil {
			return err
		}
		switch {
		case !attrKey.MatchString(a.Key) || c.keys[a.Key]:
			return fmt.Errorf("attribute %q: not an attribute key, or declared twice", a.Key)
		case a.Doc == "":
			return fmt.Errorf("attribute %q: no doc", a.Key)
		}
		c.keys[a.Key] = true
	}
	return nil
}

func (c *checker) legends(f *File) error {
	if err := c.legend("terminal", f.Legends.Terminal, func(cat Category) bool { return cat.Letter != "" }); err != nil {
		return err
	}
	return c.legend("page", f.Legends.Page, func(Category) bool { return true })
}

func (c *checker) legend(which string, list []string, mustHave func(Category) bool) error {
	seen := map[string]bool{}
	for _, n := range list {
		if _, ok := c.byName[n]; !ok || seen[n] {
			return fmt.Errorf("legends.%s: %q is not a category or mark, or listed twice", which, n)
		}
		seen[n] = true
	}
	for n, cat := range c.byName {
		if mustHave(cat) && !seen[n] {
			return fmt.Errorf("legends.%s leaves out %q", which, n)
		}
		if which == "terminal" && seen[n] && cat.Letter == "" {
			return fmt.Errorf("legends.terminal lists %q, which has no letter", n)
		}
	}
	return nil
}

// category returns the category or mark called name; check has made sure there is one.
func (f *File) category(name string) Category {
	for _, c := range append(append([]Category(nil), f.Categories...), f.Marks...) {
		if c.Name == name {
			return c
		}
	}
	panic("conventions: no category " + name)
}
