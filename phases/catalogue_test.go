package phases

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A span name is written once, in conventions.yaml: no Go file of the module but the one
// generated from it holds one as a string literal, so a view cannot match a name the builder no
// longer draws (test/ is the test beds' own code, which counts spans independently of
// readyspan's constants; tests are not looked at).
func TestSpanNamesOnlyInTheCatalogue(t *testing.T) {
	names := map[string]bool{RootSpanName: true}
	for _, s := range Catalogue {
		names[s.Name] = true
	}
	root := ".."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "deploy" || d.Name() == "test" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		if filepath.Base(path) == "generated_conventions.go" || filepath.Base(path) == "span.go" && filepath.Base(filepath.Dir(path)) == "phases" {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if v, err := strconv.Unquote(lit.Value); err == nil && names[v] {
					t.Errorf("%s: the span name %q is written out; use the catalogue's constant", path, v)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Every catalogued span lies under one of the six phases.
func TestCatalogueEntries(t *testing.T) {
	phase := map[string]bool{}
	for _, p := range Phases {
		phase[p] = true
	}
	seen := map[string]bool{}
	for _, s := range Catalogue {
		if !phase[s.Phase] || seen[s.Name] {
			t.Errorf("%+v: unknown phase or listed twice", s)
		}
		seen[s.Name] = true
	}
	if !IsContainerSpan(SpanContainerInit) || IsContainerSpan(SpanImagePull) || CategoryOf(SpanReadiness) != CategoryReadiness {
		t.Error("the catalogue's lookups disagree with its table")
	}
}
