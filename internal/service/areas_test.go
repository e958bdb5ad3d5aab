package service

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryAreaIsAsserted: service.go asserts at compile time that the
// service implements each interface of package areas, so that a method
// an area gains and the service lacks fails the build here rather than in
// one of the clients that ask for the area.
func TestEveryAreaIsAsserted(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join("areas", "*.go"))
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
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				if ts := s.(*ast.TypeSpec); ts.Name.IsExported() {
					if _, ok := ts.Type.(*ast.InterfaceType); ok {
						areas = append(areas, ts.Name.Name)
					}
				}
			}
		}
	}
	if len(areas) == 0 {
		t.Fatal("no interfaces found in package areas")
	}
	f, err := parser.ParseFile(fset, "service.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	asserted := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "_" {
			return true
		}
		if sel, ok := vs.Type.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "areas" {
				asserted[sel.Sel.Name] = true
			}
		}
		return true
	})
	for _, a := range areas {
		if !asserted[a] {
			t.Errorf("service.go does not assert that *Service implements areas.%s", a)
		}
	}
}
