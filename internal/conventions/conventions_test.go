package conventions

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the module's root, from this package's directory.
const root = "../.."

// Every generated file is what phases/conventions.yaml gives today: a file edited by hand, or a
// YAML edited without go generate, fails here.
func TestGeneratedFilesUpToDate(t *testing.T) {
	outs, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		have, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(o.Path)))
		if err != nil {
			t.Errorf("%s: %v; run go generate ./phases", o.Path, err)
			continue
		}
		if !bytes.Equal(have, o.Data) {
			t.Errorf("%s is not what %s generates (%s); run go generate ./phases, and edit the YAML, not the generated file",
				o.Path, Source, firstDifference(have, o.Data))
		}
	}
}

// firstDifference names the first line where have and want differ.
func firstDifference(have, want []byte) string {
	h, w := strings.Split(string(have), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(h) || i < len(w); i++ {
		if i >= len(h) || i >= len(w) || h[i] != w[i] {
			var hl, wl string
			if i < len(h) {
				hl = h[i]
			}
			if i < len(w) {
				wl = w[i]
			}
			return fmt.Sprintf("line %d: have %q, want %q", i+1, hl, wl)
		}
	}
	return "equal"
}

// The generated files say so on their first line, in the form tools look for (Go's
// `^// Code generated .* DO NOT EDIT\.$`; the same words in the stylesheet's comment).
func TestGeneratedFilesSaySo(t *testing.T) {
	outs, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	header := regexp.MustCompile(`^(// Code generated .* DO NOT EDIT\.|/\* Code generated .* DO NOT EDIT\. \*/)$`)
	for _, o := range outs {
		if strings.HasSuffix(o.Path, ".md") {
			continue // a doc's generated part is between its markers
		}
		first, _, _ := strings.Cut(string(o.Data), "\n")
		if !header.MatchString(first) {
			t.Errorf("%s begins %q, not with a Code generated … DO NOT EDIT. line", o.Path, first)
		}
	}
}

// The page fills every class the generated parts name: each category's and mark's class (the
// Gantt's rows and legend) and each category's name (the critical path's table), with a
// .c-<class> rule in app.css. The colours are generated; how a class is filled is not.
func TestPageStylesEveryCategory(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, Source))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	css, err := os.ReadFile(filepath.Join(root, "web/assets/app.css"))
	if err != nil {
		t.Fatal(err)
	}
	styled := map[string]bool{}
	for _, m := range regexp.MustCompile(`\.c-([a-z0-9_]+)[\s,{]`).FindAllStringSubmatch(string(css), -1) {
		styled[m[1]] = true
	}
	for _, c := range append(append([]Category(nil), f.Categories...), f.Marks...) {
		if !styled[c.PageClass()] {
			t.Errorf("%s: app.css has no .c-%s rule", c.Name, c.PageClass())
		}
	}
	for _, c := range f.Categories {
		if !styled[c.Name] {
			t.Errorf("%s: app.css has no .c-%s rule for the critical path's table", c.Name, c.Name)
		}
	}
}

// Parse refuses a file that would generate something wrong or ambiguous. Each case changes one
// line of a valid file.
func TestParseRefuses(t *testing.T) {
	valid := `
phases:
  - {name: kubelet, go: PhaseKubelet}
span_categories:
  - {name: image_pull, go: CategoryImagePull}
spans:
  - {name: container.image_pull, go: SpanImagePull, phase: kubelet, category: image_pull, doc: Pulling → Pulled.}
categories:
  - {name: image_pull, words: image pulls, doc: pulls, letter: p, legend: image pull, label: image pull, colour: {light: "#0072b2"}}
  - {name: unobserved, words: not observed, doc: unseen, label: not observed}
marks:
  - {name: step, letter: "|", legend: step, label: step}
legends:
  terminal: [image_pull, step]
  page: [image_pull, unobserved, step]
attributes:
  - {key: readyspan.outcome, go: AttrOutcome, doc: The outcome.}
rollout_attributes:
  - {key: readyspan.rollout.outcome, go: AttrOutcome, doc: The rollout's outcome.}
`
	if _, err := Parse([]byte(valid)); err != nil {
		t.Fatalf("the valid file: %v", err)
	}
	for _, tc := range []struct {
		name, old, new string
	}{
		{"unknown field", "phase: kubelet, category", "phse: kubelet, category"},
		{"unknown phase", "phase: kubelet, category", "phase: kubelett, category"},
		{"unknown span category", "category: image_pull, doc", "category: pulls, doc"},
		{"span without doc", ", doc: Pulling → Pulled.}", "}"},
		{"Go name taken twice", "go: SpanImagePull", "go: PhaseKubelet"},
		{"unexported Go name", "go: SpanImagePull", "go: spanImagePull"},
		{"letter taken twice", `letter: "|"`, "letter: p"},
		{"letter of two characters", "letter: p,", "letter: pp,"},
		{"page class taken twice", "label: not observed}", "label: not observed, page: image_pull}"},
		{"colour not #rrggbb", `"#0072b2"`, `"blue"`},
		{"mark with words", "legend: step, label: step}", "legend: step, label: step, words: a step, doc: a step}"},
		{"category without words", "words: not observed, ", ""},
		{"terminal legend leaves out a letter", "terminal: [image_pull, step]", "terminal: [image_pull]"},
		{"terminal legend lists a category without a letter", "terminal: [image_pull, step]", "terminal: [image_pull, step, unobserved]"},
		{"page legend leaves out a category", "page: [image_pull, unobserved, step]", "page: [image_pull, step]"},
		{"attribute key declared in both lists", "key: readyspan.rollout.outcome", "key: readyspan.outcome"},
		{"attribute without doc", ", doc: The outcome.}", "}"},
		{"attribute key with a capital", "key: readyspan.outcome", "key: readyspan.Outcome"},
		{"Go name of a phases attribute taken twice", "go: AttrOutcome, doc: The outcome.", "go: SpanImagePull, doc: The outcome."},
		{"legend lists one twice", "page: [image_pull, unobserved, step]", "page: [image_pull, unobserved, step, step]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(valid, tc.old) {
				t.Fatalf("the valid file has no %q", tc.old)
			}
			if _, err := Parse([]byte(strings.Replace(valid, tc.old, tc.new, 1))); err == nil {
				t.Error("parsed without an error")
			}
		})
	}
}
