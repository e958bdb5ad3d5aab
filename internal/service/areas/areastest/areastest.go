// Package areastest reads the declarations that tie a type to the service
// areas, for the tests that check them: which interfaces package areas
// declares, and which of them a file asserts a type implements
// (`var _ areas.X = ...`). It is imported by tests only.
package areastest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// Interfaces returns the exported interfaces declared in package areas,
// whose directory is dir.
func Interfaces(t testing.TB, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var out []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				if ts := s.(*ast.TypeSpec); ts.Name.IsExported() {
					if _, ok := ts.Type.(*ast.InterfaceType); ok {
						out = append(out, ts.Name.Name)
					}
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no interfaces found in %s", dir)
	}
	return out
}

// Asserted returns the areas file asserts at compile time
// (`var _ areas.X = ...`), and the doc comment of the type named typeName
// in it (empty when typeName is empty or not declared there).
func Asserted(t testing.TB, file, typeName string) (asserted []string, doc string) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GenDecl:
			for _, s := range n.Specs {
				if ts, ok := s.(*ast.TypeSpec); ok && typeName != "" && ts.Name.Name == typeName {
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
	return asserted, doc
}
