package dag_test

import (
	"bytes"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/web/dag"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// checkLayout asserts the layout's invariants: every node placed once,
// every edge that is not turned around points downward and starts and ends
// on its nodes' boxes, and no two boxes overlap.
func checkLayout(t interface {
	Helper()
	Fatalf(string, ...any)
}, g dag.Graph, l dag.Layout) {
	t.Helper()
	byID := map[string]dag.Placed{}
	for _, n := range l.Nodes {
		if _, dup := byID[n.ID]; dup {
			t.Fatalf("node %s placed twice", n.ID)
		}
		byID[n.ID] = n
		if n.X < 0 || n.Y < 0 || n.X+n.W > l.Width || n.Y+n.H > l.Height {
			t.Fatalf("node %s at (%d,%d %dx%d) outside the %dx%d drawing", n.ID, n.X, n.Y, n.W, n.H, l.Width, l.Height)
		}
	}
	for _, n := range g.Nodes {
		if _, ok := byID[n.ID]; !ok {
			t.Fatalf("node %s not placed", n.ID)
		}
	}
	for _, r := range l.Routes {
		up, down := byID[r.Upstream], byID[r.Downstream]
		if r.Reversed {
			continue
		}
		if up.Layer >= down.Layer {
			t.Fatalf("edge %s→%s does not go down: layers %d→%d", r.Upstream, r.Downstream, up.Layer, down.Layer)
		}
		first, last := r.Points[0], r.Points[len(r.Points)-1]
		if first.Y != up.Y+up.H || first.X < up.X || first.X > up.X+up.W {
			t.Fatalf("edge %s→%s starts at %v, not under its upstream's box %+v", r.Upstream, r.Downstream, first, up)
		}
		if last.Y != down.Y || last.X < down.X || last.X > down.X+down.W {
			t.Fatalf("edge %s→%s ends at %v, not on its downstream's box %+v", r.Upstream, r.Downstream, last, down)
		}
		for i := 1; i < len(r.Points); i++ {
			if r.Points[i].Y <= r.Points[i-1].Y && !(r.Points[i].Y == r.Points[i-1].Y && r.Points[i].X == r.Points[i-1].X) {
				t.Fatalf("edge %s→%s goes up or sideways between %v and %v", r.Upstream, r.Downstream, r.Points[i-1], r.Points[i])
			}
		}
	}
	for i, a := range l.Nodes {
		for _, b := range l.Nodes[i+1:] {
			if a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H {
				t.Fatalf("nodes %s %+v and %s %+v overlap", a.ID, a, b.ID, b)
			}
		}
	}
}

func TestLayCases(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		g         dag.Graph
		layers    int
		crossings int
	}{
		{"empty", dag.Graph{}, 0, 0},
		{"one node", graph("a"), 1, 0},
		{"chain", graph("a b c", "a>b", "b>c"), 3, 0},
		{"diamond", graph("a b c d", "a>b", "a>c", "b>d", "c>d"), 3, 0},
		{"long edge gets bend points", graph("a b c d", "a>b", "b>c", "c>d", "a>d"), 4, 0},
		{"crossing removed", graph("a b c d", "a>d", "b>c"), 2, 0},
		{"dangling edge left out", graph("a b", "a>b", "a>zz", "zz>b"), 2, 0},
		{"duplicates drawn once", graph("a b a", "a>b", "a>b"), 2, 0},
		{"cycle broken", graph("a b c", "a>b", "b>c", "c>a"), 3, 0},
		{"self loop left out", graph("a", "a>a"), 1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := dag.Lay(tc.g, dag.Options{})
			checkLayout(t, tc.g, l)
			if l.Layers != tc.layers || l.Crossings != tc.crossings {
				t.Fatalf("got %v, want %d layers and %d crossings", l, tc.layers, tc.crossings)
			}
		})
	}
}

func TestLongEdgeBendsBesideTheMiddleNode(t *testing.T) {
	t.Parallel()
	g := graph("a b c", "a>b", "b>c", "a>c")
	l := dag.Lay(g, dag.Options{})
	var long dag.Route
	for _, r := range l.Routes {
		if r.Upstream == "a" && r.Downstream == "c" {
			long = r
		}
	}
	if len(long.Points) != 4 {
		t.Fatalf("a→c has points %v, want a bend point above and below layer 1", long.Points)
	}
	b := l.Nodes[1]
	if x := long.Points[1].X; x >= b.X && x <= b.X+b.W {
		t.Fatalf("a→c passes layer 1 at x=%d, through b's box %+v", x, b)
	}
}

// TestLayProperties lays random DAGs out and checks the invariants and
// that laying the same graph out twice gives the same drawing.
func TestLayProperties(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 40).Draw(rt, "nodes")
		g := dag.Graph{}
		for i := range n {
			g.Nodes = append(g.Nodes, dag.Node{ID: fmt.Sprintf("t%d", i), Status: models.StatusReady})
		}
		m := rapid.IntRange(0, 3*n).Draw(rt, "edges")
		for range m {
			a := rapid.IntRange(0, n-1).Draw(rt, "from")
			b := rapid.IntRange(0, n-1).Draw(rt, "to")
			if a == b {
				continue
			}
			if a > b {
				a, b = b, a
			}
			g.Edges = append(g.Edges, dag.Edge{Upstream: fmt.Sprintf("t%d", a), Downstream: fmt.Sprintf("t%d", b)})
		}
		l := dag.Lay(g, dag.Options{})
		checkLayout(rt, g, l)
		var x, y bytes.Buffer
		if err := dag.WriteSVG(&x, l, "g"); err != nil {
			rt.Fatalf("write: %v", err)
		}
		if err := dag.WriteSVG(&y, dag.Lay(g, dag.Options{}), "g"); err != nil {
			rt.Fatalf("write: %v", err)
		}
		if !bytes.Equal(x.Bytes(), y.Bytes()) {
			rt.Fatalf("the same graph drew differently twice")
		}
	})
}

func TestWriteSVGGolden(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		g    dag.Graph
	}{
		{"cascade", dag.Graph{
			Nodes: []dag.Node{
				{ID: "build", Label: "Build the <parser>", Href: "/ui/tasks/build", Status: models.StatusCompleted},
				{ID: "lint", Label: "Lint", Href: "/ui/tasks/lint", Status: models.StatusBlocked, RootCause: true},
				{ID: "test", Label: "Run the whole test suite on every platform", Href: "/ui/tasks/test", Status: models.StatusInProgress, Focus: true},
				{ID: "docs", Label: "Docs", Href: "/ui/tasks/docs", Status: models.StatusReady},
				{ID: "ship", Label: "Ship", Href: "/ui/tasks/ship", Status: models.StatusBlocked},
			},
			Edges: []dag.Edge{
				{Upstream: "build", Downstream: "lint"}, {Upstream: "build", Downstream: "test"},
				{Upstream: "lint", Downstream: "ship"}, {Upstream: "test", Downstream: "ship"},
				{Upstream: "build", Downstream: "ship"}, {Upstream: "build", Downstream: "docs", Soft: true},
			},
		}},
		{"fanout", dag.Graph{
			Nodes: []dag.Node{
				{ID: "plan", Status: models.StatusCompleted},
				{ID: "upgrade", Status: models.StatusInProgress, Note: "×3"},
				{ID: "merge", Status: models.StatusDefined},
			},
			Edges: []dag.Edge{{Upstream: "plan", Downstream: "upgrade"}, {Upstream: "upgrade", Downstream: "merge"}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			if err := dag.WriteSVG(&b, dag.Lay(tc.g, dag.Options{}), tc.name); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", tc.name+".svg"), b.Bytes())
		})
	}
}

// TestApprovalIsDrawnApartFromLanding: a task waiting for a person's
// approval is a pale box with a bold orange border, a task being verified
// or waiting to land a solid orange one with the thin border, in the
// graph and in the legend.
func TestApprovalIsDrawnApartFromLanding(t *testing.T) {
	t.Parallel()
	g := dag.Graph{Nodes: []dag.Node{
		{ID: "a", Label: "A", Status: models.StatusAwaitingApproval},
		{ID: "v", Label: "V", Status: models.StatusVerifying},
	}}
	var b bytes.Buffer
	if err := dag.WriteSVG(&b, dag.Lay(g, dag.Options{}), "x"); err != nil {
		t.Fatal(err)
	}
	if err := dag.WriteLegend(&b); err != nil {
		t.Fatal(err)
	}
	approval, verifying := dag.StatusColor(models.StatusAwaitingApproval), dag.StatusColor(models.StatusVerifying)
	if approval.Fill == verifying.Fill || approval.Stroke == "" {
		t.Fatalf("approval %+v, verifying %+v", approval, verifying)
	}
	s := b.String()
	for _, want := range []string{
		`fill="` + approval.Fill + `" stroke="` + approval.Stroke + `" stroke-width="3"/>`,
		`fill="` + verifying.Fill + `" stroke="#333333" stroke-width="1"/>`,
		`rx="3" fill="` + approval.Fill + `" stroke="` + approval.Stroke + `" stroke-width="3"/><text x="32" y="139">AWAITING_APPROVAL</text>`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("SVG lacks %q:\n%s", want, s)
		}
	}
}

func TestWriteSVGNamesStatusAndRootCause(t *testing.T) {
	t.Parallel()
	g := dag.Graph{Nodes: []dag.Node{
		{ID: "a", Label: "A", Status: models.StatusFailed, RootCause: true, Href: "/ui/tasks/a"},
		{ID: "b", Label: "B", Status: models.StatusBlocked},
	}, Edges: []dag.Edge{{Upstream: "a", Downstream: "b"}}}
	var b bytes.Buffer
	if err := dag.WriteSVG(&b, dag.Lay(g, dag.Options{}), "x"); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	for _, want := range []string{
		`<a href="/ui/tasks/a" class="node st-failed root-cause"`,
		`<title>a: A — FAILED (root cause)</title>`,
		`fill="` + dag.StatusColor(models.StatusFailed).Fill + `"`,
		`stroke="` + dag.RootCauseStroke + `"`,
		`<g class="node st-blocked" data-id="b"`,
		`>BLOCKED</text>`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("SVG lacks %q:\n%s", want, s)
		}
	}
}

func TestStatusColoursDistinctPerPhase(t *testing.T) {
	t.Parallel()
	// Statuses a person must tell apart at a glance get distinct fills.
	// Work waiting for a person's approval is told from work being
	// verified or waiting to land.
	distinct := []models.TaskStatus{models.StatusDefined, models.StatusReady, models.StatusInProgress,
		models.StatusWaitingInput, models.StatusPaused, models.StatusVerifying, models.StatusAwaitingApproval,
		models.StatusCompleted, models.StatusFailed, models.StatusBlocked}
	seen := map[string]models.TaskStatus{}
	for _, s := range distinct {
		c := dag.StatusColor(s)
		if prev, ok := seen[c.Fill]; ok {
			t.Errorf("%s and %s share the fill %s", prev, s, c.Fill)
		}
		seen[c.Fill] = s
	}
	for _, s := range models.TaskStatuses {
		if c := dag.StatusColor(s); c == dag.StatusColor("NOPE") {
			t.Errorf("status %s has no colour of its own", s)
		}
	}
}

// graph builds a graph from "a b c" node ids and "a>b" edges.
func graph(nodes string, edges ...string) dag.Graph {
	var g dag.Graph
	for _, id := range strings.Fields(nodes) {
		g.Nodes = append(g.Nodes, dag.Node{ID: id, Label: strings.ToUpper(id), Status: models.StatusReady})
	}
	for _, e := range edges {
		u, d, _ := strings.Cut(e, ">")
		g.Edges = append(g.Edges, dag.Edge{Upstream: u, Downstream: d})
	}
	return g
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs (run with -update after checking):\n%s", path, got)
	}
}

// layeredGraph is n tasks in layers of about width, each depending on up
// to three tasks of the layer above and, every seventh, on one two layers
// up: the shape of a project's open work.
func layeredGraph(n, width int) dag.Graph {
	var g dag.Graph
	id := func(i int) string { return fmt.Sprintf("task-%04d", i) }
	for i := range n {
		g.Nodes = append(g.Nodes, dag.Node{ID: id(i), Label: "task " + id(i), Href: "/ui/tasks/" + id(i),
			Status: models.TaskStatuses[i%len(models.TaskStatuses)]})
		if i < width {
			continue
		}
		base := (i/width - 1) * width
		for k := range 3 {
			g.Edges = append(g.Edges, dag.Edge{Upstream: id(base + (i*7+k*13)%width), Downstream: id(i)})
		}
		if i%7 == 0 && i >= 2*width {
			g.Edges = append(g.Edges, dag.Edge{Upstream: id(base - width + i%width), Downstream: id(i)})
		}
	}
	return g
}

func TestLayThousandTasks(t *testing.T) {
	t.Parallel()
	g := layeredGraph(1000, 40)
	l := dag.Lay(g, dag.Options{})
	checkLayout(t, g, l)
	if l.Layers != 25 {
		t.Fatalf("got %v, want 25 layers", l)
	}
}

func BenchmarkLayAndDraw1000Tasks(b *testing.B) {
	g := layeredGraph(1000, 40)
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		l := dag.Lay(g, dag.Options{})
		if err := dag.WriteSVG(&buf, l, "bench"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "svg-bytes")
}

// TestLongEdgeStaysBesideItsEnds checks that a long edge in a graph drawn
// without crossings bends beside its ends, not past an unrelated task at
// the end of the layer it crosses.
func TestLongEdgeStaysBesideItsEnds(t *testing.T) {
	t.Parallel()
	g := graph("build lint test docs ship", "build>lint", "build>test", "lint>ship", "test>ship", "build>ship", "build>docs")
	l := dag.Lay(g, dag.Options{})
	checkLayout(t, g, l)
	var docs dag.Placed
	for _, n := range l.Nodes {
		if n.ID == "docs" {
			docs = n
		}
	}
	for _, r := range l.Routes {
		if r.Upstream == "build" && r.Downstream == "ship" {
			if len(r.Points) != 4 || r.Points[1].X > docs.X {
				t.Fatalf("build→ship bends at %v, past docs at x=%d", r.Points, docs.X)
			}
			return
		}
	}
	t.Fatal("no route build→ship")
}

// TestEdgesMeetBoxesApart checks that the edges leaving one box, and those
// arriving at one box, touch it at distinct points, ordered as their
// other ends, so that arrows stay apart.
func TestEdgesMeetBoxesApart(t *testing.T) {
	t.Parallel()
	g := graph("a b c d", "a>b", "a>c", "b>d", "c>d")
	l := dag.Lay(g, dag.Options{})
	checkLayout(t, g, l)
	end := map[string]dag.Point{}
	start := map[string]dag.Point{}
	for _, r := range l.Routes {
		start[r.Upstream+">"+r.Downstream] = r.Points[0]
		end[r.Upstream+">"+r.Downstream] = r.Points[len(r.Points)-1]
	}
	if !(start["a>b"].X < start["a>c"].X) {
		t.Errorf("edges leave a at %v and %v", start["a>b"], start["a>c"])
	}
	if !(end["b>d"].X < end["c>d"].X) {
		t.Errorf("edges reach d at %v and %v", end["b>d"], end["c>d"])
	}
}

// deepChain is n tasks in a chain with an edge from the first task to
// every other: the deepest graph, where each long edge crosses up to n-2
// layers.
func deepChain(n int) dag.Graph {
	var g dag.Graph
	id := func(i int) string { return fmt.Sprintf("task-%04d", i) }
	for i := range n {
		g.Nodes = append(g.Nodes, dag.Node{ID: id(i), Label: "task " + id(i), Href: "/ui/tasks/" + id(i)})
		if i > 0 {
			g.Edges = append(g.Edges, dag.Edge{Upstream: id(i - 1), Downstream: id(i)})
		}
		if i > 1 {
			g.Edges = append(g.Edges, dag.Edge{Upstream: id(0), Downstream: id(i)})
		}
	}
	return g
}

func BenchmarkLayDeepChain1000(b *testing.B) {
	g := deepChain(1000)
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		l := dag.Lay(g, dag.Options{})
		if err := dag.WriteSVG(&buf, l, "bench"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "svg-bytes")
}

// TestLongEdgesHaveBoundedBendPoints: an edge spanning more than
// MaxBendSpan layers is drawn straight, so the points of a deep chain's
// drawing grow with its edges, not with their lengths.
func TestLongEdgesHaveBoundedBendPoints(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		g    dag.Graph
	}{
		{"a chain of 200 with an edge from its first task to every other", deepChain(200)},
		{"1,000 tasks in 25 layers", layeredGraph(1000, 40)},
	}
	for _, tc := range tests {
		l := dag.Lay(tc.g, dag.Options{})
		checkLayout(t, tc.g, l)
		points := 0
		for _, r := range l.Routes {
			points += len(r.Points)
			span := 0
			for _, n := range l.Nodes {
				if n.ID == r.Upstream {
					span -= n.Layer
				} else if n.ID == r.Downstream {
					span += n.Layer
				}
			}
			if span > dag.MaxBendSpan && len(r.Points) != 2 {
				t.Errorf("%s: %s→%s spans %d layers and bends %d times", tc.name, r.Upstream, r.Downstream, span, len(r.Points)-2)
			}
		}
		// Ten points an edge: its ends and bend points above and below
		// the few layers it may cross (MaxBendSpan).
		if limit := len(l.Routes) * 10; points > limit {
			t.Errorf("%s: %d points for %d edges, want at most %d", tc.name, points, len(l.Routes), limit)
		}
	}
}

// hostile are texts that would end an element or an attribute and start
// a script if written unescaped.
var hostile = []string{`</title><script>alert(1)</script>`, `"><svg onload=alert(1)>`, `' onmouseover='alert(1)`}

// TestWriteSVGEscapesHostileText: ids, titles, notes, links and the
// label come out as text and attribute values, never as markup.
func TestWriteSVGEscapesHostileText(t *testing.T) {
	t.Parallel()
	for _, h := range hostile {
		g := dag.Graph{Nodes: []dag.Node{
			{ID: "a" + h, Label: h, Href: "/ui/tasks/" + h, Note: h, Status: models.TaskStatus(h), RootCause: true},
			{ID: "b" + h, Label: h},
		}, Edges: []dag.Edge{{Upstream: "a" + h, Downstream: "b" + h}}}
		var b bytes.Buffer
		if err := dag.WriteSVG(&b, dag.Lay(g, dag.Options{}), h); err != nil {
			t.Fatal(err)
		}
		checkInert(t, b.String(), h)
	}
}

// checkInert fails unless svg is well-formed XML of one <svg> with no
// script, no event attribute, and text among its decoded text or
// attribute values (so written escaped, not dropped).
func checkInert(t *testing.T, svg, text string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(svg))
	svgs, seen := 0, false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%q: the SVG is not well-formed: %v\n%s", text, err, svg)
		}
		switch x := tok.(type) {
		case xml.StartElement:
			if x.Name.Local == "svg" {
				svgs++
			}
			if x.Name.Local == "script" || x.Name.Local == "foreignObject" {
				t.Fatalf("%q: the SVG holds a <%s>:\n%s", text, x.Name.Local, svg)
			}
			for _, a := range x.Attr {
				if strings.HasPrefix(strings.ToLower(a.Name.Local), "on") {
					t.Fatalf("%q: the SVG has an attribute %s:\n%s", text, a.Name.Local, svg)
				}
				seen = seen || strings.Contains(a.Value, text)
			}
		case xml.CharData:
			seen = seen || strings.Contains(string(x), text)
		}
	}
	if svgs != 1 || !seen {
		t.Fatalf("%q: %d <svg> elements, text shown %v:\n%s", text, svgs, seen, svg)
	}
}
