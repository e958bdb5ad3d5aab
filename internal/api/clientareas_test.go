package api_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestClientAssertsTheAreasItClaims: the Client's doc comment names the
// areas of the service it serves over HTTP and those it does not; every
// area it claims is asserted at compile time in client.go, every area it
// asserts is claimed, and every area of package areas is named one way or
// the other, so that a new area is decided for the client too.
func TestClientAssertsTheAreasItClaims(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join("..", "service", "areas", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var areas []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, s := range g.Specs {
					if ts := s.(*ast.TypeSpec); ts.Name.IsExported() {
						if _, ok := ts.Type.(*ast.InterfaceType); ok {
							areas = append(areas, ts.Name.Name)
						}
					}
				}
			}
		}
	}
	if len(areas) == 0 {
		t.Fatal("no interfaces found in package areas")
	}
	f, err := parser.ParseFile(fset, "client.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var doc string
	var asserted []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GenDecl:
			for _, s := range n.Specs {
				if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.Name == "Client" {
					doc = n.Doc.Text()
				}
			}
		case *ast.ValueSpec:
			if len(n.Names) == 1 && n.Names[0].Name == "_" {
				if sel, ok := n.Type.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "areas" {
						asserted = append(asserted, sel.Sel.Name)
					}
				}
			}
		}
		return true
	})
	claim, _, ok := strings.Cut(doc, "(asserted below)")
	if !ok {
		t.Fatalf("the Client's doc does not list the areas it claims before \"(asserted below)\":\n%s", doc)
	}
	_, claim, _ = strings.Cut(claim, "exposes:")
	word := regexp.MustCompile(`\b[A-Z][A-Za-z]+\b`)
	claimed := word.FindAllString(claim, -1)
	named := word.FindAllString(doc, -1)
	for _, a := range areas {
		switch {
		case slices.Contains(claimed, a) && !slices.Contains(asserted, a):
			t.Errorf("the Client claims areas.%s but client.go does not assert it", a)
		case slices.Contains(asserted, a) && !slices.Contains(claimed, a):
			t.Errorf("client.go asserts areas.%s but the Client's doc does not claim it", a)
		case !slices.Contains(named, a):
			t.Errorf("the Client's doc says nothing of areas.%s: claim it (and assert it) or say why not", a)
		}
	}
}
