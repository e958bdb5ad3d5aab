package dag

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Defaults of the layout's geometry, in SVG user units (pixels).
const (
	// DefaultNodeWidth and DefaultNodeHeight are a node's box.
	DefaultNodeWidth  = 168
	DefaultNodeHeight = 40
	// DefaultGapX is the least horizontal space between two boxes of a
	// layer; DefaultGapY the vertical space between layers.
	DefaultGapX = 24
	DefaultGapY = 56
	// DefaultMargin surrounds the drawing.
	DefaultMargin = 16
	// MaxSweeps bounds the barycenter sweeps of crossing reduction (each
	// sweep visits every layer once, alternately down and up).
	MaxSweeps = 8
	// coordPasses bounds the passes of coordinate assignment.
	coordPasses = 6
	// dummyWidth is the room an edge's bend point takes in a layer.
	dummyWidth = 8
	// MaxBendSpan is the most layers an edge may span and still get a
	// bend point in each layer it crosses; a longer edge is drawn straight
	// from its upstream to its downstream and takes no part in ordering
	// the layers, so that the bend points stay linear in the edges (a deep
	// chain with an edge from its first task to every other would
	// otherwise have a number quadratic in its length).
	MaxBendSpan = 4
)

// Node is a task to draw.
type Node struct {
	// ID is the task's id; Label the text in its box (its title); Href
	// the page its box links to (none when empty).
	ID     string
	Label  string
	Href   string
	Status models.TaskStatus
	// RootCause marks the failed upstream a cascade of BLOCKED tasks
	// started from; Focus the task a neighbourhood graph is drawn around.
	RootCause bool
	Focus     bool
	// Note is extra text for the box's second line (e.g. "×3" for a
	// workflow step's fan-out); empty draws the status alone.
	Note string
}

// Edge is a dependency: Upstream must finish before Downstream.
type Edge struct {
	Upstream, Downstream string
	// Soft is an edge that does not require the upstream's success; it is
	// drawn dashed.
	Soft bool
}

// Graph is what to lay out. Edges naming a node not in Nodes are left out
// (a neighbourhood's edges to tasks beyond it); duplicate edges and nodes
// are drawn once.
type Graph struct {
	Nodes []Node
	Edges []Edge
}

// Options are a layout's geometry; zero fields take the defaults.
type Options struct {
	NodeWidth, NodeHeight, GapX, GapY, Margin int
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.NodeWidth, DefaultNodeWidth)
	def(&o.NodeHeight, DefaultNodeHeight)
	def(&o.GapX, DefaultGapX)
	def(&o.GapY, DefaultGapY)
	def(&o.Margin, DefaultMargin)
	return o
}

// Placed is a node with its box: X, Y is its top-left corner; Layer its
// layer from the top (0).
type Placed struct {
	Node
	X, Y, W, H int
	Layer      int
}

// Point is a point of the drawing.
type Point struct{ X, Y int }

// Route is an edge's path from the bottom of its upstream's box to the top
// of its downstream's, through its bend points; Reversed says the edge was
// turned around to break a cycle (it then points up).
type Route struct {
	Edge
	Points   []Point
	Reversed bool
}

// Layout is a graph laid out.
type Layout struct {
	Nodes         []Placed
	Routes        []Route
	Width, Height int
	// Layers is the number of layers; Crossings the edge crossings left
	// between adjacent layers.
	Layers    int
	Crossings int
}

// arc is an edge of the layered graph, from an upper node to a lower one
// (edges[edge], turned around when it closed a cycle).
type arc struct{ from, to, edge int }

// vertex is a node or an edge's bend point (dummy) in the layered graph.
type vertex struct {
	node  int // index into the graph's nodes, or -1 for a dummy
	layer int
	pos   int     // index within its layer
	x     float64 // centre
	width float64
	up    []int // vertices in the layer above joined to it
	down  []int // vertices in the layer below joined to it
}

// Lay lays g out. It never fails on a graph's shape: cycles are broken and
// dangling edges left out.
func Lay(g Graph, opt Options) Layout {
	opt = opt.withDefaults()
	nodes, index := dedupeNodes(g.Nodes)
	n := len(nodes)
	edges := dedupeEdges(g.Edges, index)

	// Adjacency in input order.
	out := make([][]int, n)
	for i, e := range edges {
		u := index[e.Upstream]
		out[u] = append(out[u], i)
	}
	reversed := backEdges(n, edges, out, index)

	// Directed edges after reversal: from → to.
	arcs := make([]arc, 0, len(edges))
	preds := make([][]int, n)
	succs := make([][]int, n)
	for i, e := range edges {
		u, d := index[e.Upstream], index[e.Downstream]
		if reversed[i] {
			u, d = d, u
		}
		if u == d {
			continue // a self-loop has no drawing in a layered layout
		}
		arcs = append(arcs, arc{u, d, i})
		preds[d] = append(preds[d], u)
		succs[u] = append(succs[u], d)
	}

	layer := longestPath(n, preds, succs)
	layers := 0
	for _, l := range layer {
		layers = max(layers, l+1)
	}

	// Vertices: the nodes, then one dummy per layer an arc crosses, for
	// arcs spanning at most MaxBendSpan layers.
	vs := make([]vertex, n, n+len(arcs))
	for i := range vs {
		vs[i] = vertex{node: i, layer: layer[i], width: float64(opt.NodeWidth)}
	}
	chains := make([][]int, len(arcs)) // vertices along each arc, ends included
	for ai, a := range arcs {
		if layer[a.to]-layer[a.from] > MaxBendSpan {
			chains[ai] = []int{a.from, a.to} // drawn straight
			continue
		}
		chain := []int{a.from}
		prev := a.from
		for l := layer[a.from] + 1; l < layer[a.to]; l++ {
			vs = append(vs, vertex{node: -1, layer: l, width: dummyWidth})
			d := len(vs) - 1
			vs[prev].down = append(vs[prev].down, d)
			vs[d].up = append(vs[d].up, prev)
			chain = append(chain, d)
			prev = d
		}
		vs[prev].down = append(vs[prev].down, a.to)
		vs[a.to].up = append(vs[a.to].up, prev)
		chains[ai] = append(chain, a.to)
	}

	// Initial order: vertices by layer in creation order.
	rows := make([][]int, layers)
	for v := range vs {
		rows[vs[v].layer] = append(rows[vs[v].layer], v)
	}
	for _, row := range rows {
		for p, v := range row {
			vs[v].pos = p
		}
	}
	crossings := reduceCrossings(vs, rows)
	assignX(vs, rows, float64(opt.GapX))

	// Shift so the leftmost box starts at the margin.
	minX := math.Inf(1)
	maxX := math.Inf(-1)
	for _, v := range vs {
		minX = math.Min(minX, v.x-v.width/2)
		maxX = math.Max(maxX, v.x+v.width/2)
	}
	if len(vs) == 0 {
		minX, maxX = 0, 0
	}
	shift := float64(opt.Margin) - minX
	cx := func(v int) int { return int(math.Round(vs[v].x + shift)) }
	top := func(l int) int { return opt.Margin + l*(opt.NodeHeight+opt.GapY) }

	lay := Layout{Layers: layers, Crossings: crossings}
	lay.Width = int(math.Round(maxX-minX)) + 2*opt.Margin
	lay.Height = 2 * opt.Margin
	if layers > 0 {
		lay.Height += layers*opt.NodeHeight + (layers-1)*opt.GapY
	}
	lay.Nodes = make([]Placed, n)
	for i := range n {
		lay.Nodes[i] = Placed{Node: nodes[i], X: cx(i) - opt.NodeWidth/2, Y: top(layer[i]),
			W: opt.NodeWidth, H: opt.NodeHeight, Layer: layer[i]}
	}
	paths := make([][]Point, len(arcs))
	for ai, a := range arcs {
		chain := chains[ai]
		pts := make([]Point, 0, len(chain)+1)
		pts = append(pts, Point{cx(a.from), top(layer[a.from]) + opt.NodeHeight})
		for _, d := range chain[1 : len(chain)-1] {
			// A bend point passes the layer at its box's top and bottom.
			pts = append(pts, Point{cx(d), top(vs[d].layer)}, Point{cx(d), top(vs[d].layer) + opt.NodeHeight})
		}
		pts = append(pts, Point{cx(a.to), top(layer[a.to])})
		paths[ai] = pts
	}
	spreadEnds(paths, arcs, n, opt.NodeWidth)
	lay.Routes = make([]Route, 0, len(arcs))
	for ai, a := range arcs {
		r := Route{Edge: edges[a.edge], Reversed: reversed[a.edge], Points: paths[ai]}
		if r.Reversed {
			slices.Reverse(r.Points)
		}
		lay.Routes = append(lay.Routes, r)
	}
	return lay
}

// spreadEnds spreads the ends of a node's edges along its box's bottom
// (edges leaving) and top (edges arriving), in the order of where each
// edge goes or comes from, so that arrows into one box do not meet in one
// point. The ends stay inside the middle two thirds of the box.
func spreadEnds(paths [][]Point, arcs []arc, n, width int) {
	out := make([][]int, n)
	in := make([][]int, n)
	for ai, a := range arcs {
		out[a.from] = append(out[a.from], ai)
		in[a.to] = append(in[a.to], ai)
	}
	spread := func(list []int, end func(ai int) *Point, other func(ai int) Point) {
		if len(list) < 2 {
			return
		}
		slices.SortStableFunc(list, func(a, b int) int { return other(a).X - other(b).X })
		span := width * 2 / 3
		mid := end(list[0]).X
		for i, ai := range list {
			end(ai).X = mid - span/2 + span*(2*i+1)/(2*len(list))
		}
	}
	for v := range n {
		spread(out[v], func(ai int) *Point { return &paths[ai][0] }, func(ai int) Point { return paths[ai][1] })
		spread(in[v], func(ai int) *Point { return &paths[ai][len(paths[ai])-1] },
			func(ai int) Point { return paths[ai][len(paths[ai])-2] })
	}
}

func dedupeNodes(in []Node) ([]Node, map[string]int) {
	index := make(map[string]int, len(in))
	out := make([]Node, 0, len(in))
	for _, nd := range in {
		if _, ok := index[nd.ID]; ok {
			continue
		}
		index[nd.ID] = len(out)
		out = append(out, nd)
	}
	return out, index
}

func dedupeEdges(in []Edge, index map[string]int) []Edge {
	seen := make(map[[2]string]bool, len(in))
	out := make([]Edge, 0, len(in))
	for _, e := range in {
		_, okU := index[e.Upstream]
		_, okD := index[e.Downstream]
		k := [2]string{e.Upstream, e.Downstream}
		if !okU || !okD || seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, e)
	}
	return out
}

// backEdges marks the edges a depth-first search in input order finds
// going back to a node on its stack: turning them around leaves a DAG.
func backEdges(n int, edges []Edge, out [][]int, index map[string]int) []bool {
	const (
		white = iota
		grey
		black
	)
	colour := make([]int, n)
	back := make([]bool, len(edges))
	type frame struct{ v, next int }
	for s := range n {
		if colour[s] != white {
			continue
		}
		stack := []frame{{s, 0}}
		colour[s] = grey
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.next == len(out[f.v]) {
				colour[f.v] = black
				stack = stack[:len(stack)-1]
				continue
			}
			ei := out[f.v][f.next]
			f.next++
			d := index[edges[ei].Downstream]
			switch colour[d] {
			case grey:
				back[ei] = true
			case white:
				colour[d] = grey
				stack = append(stack, frame{d, 0})
			}
		}
	}
	return back
}

// longestPath puts each node one layer below its deepest predecessor
// (Kahn's order; the graph is acyclic here).
func longestPath(n int, preds, succs [][]int) []int {
	layer := make([]int, n)
	indeg := make([]int, n)
	for v := range n {
		indeg[v] = len(preds[v])
	}
	queue := make([]int, 0, n)
	for v := range n {
		if indeg[v] == 0 {
			queue = append(queue, v)
		}
	}
	for i := 0; i < len(queue); i++ {
		u := queue[i]
		for _, d := range succs[u] {
			layer[d] = max(layer[d], layer[u]+1)
			if indeg[d]--; indeg[d] == 0 {
				queue = append(queue, d)
			}
		}
	}
	return layer
}

// reduceCrossings runs barycenter sweeps and keeps the best order seen
// (the later on a tie: sweeps also pull a node and its bend points
// towards their neighbours); it returns the crossings of that order. A
// down and an up sweep always run; more only while crossings remain.
func reduceCrossings(vs []vertex, rows [][]int) int {
	best := countCrossings(vs, rows)
	bestRows := cloneRows(rows)
	for sweep := 0; sweep < MaxSweeps && (best > 0 || sweep < 2); sweep++ {
		if sweep%2 == 0 {
			for l := 1; l < len(rows); l++ {
				orderBy(vs, rows[l], func(v int) []int { return vs[v].up })
			}
		} else {
			for l := len(rows) - 2; l >= 0; l-- {
				orderBy(vs, rows[l], func(v int) []int { return vs[v].down })
			}
		}
		if c := countCrossings(vs, rows); c <= best {
			best = c
			bestRows = cloneRows(rows)
		}
	}
	for l, row := range bestRows {
		rows[l] = row
		for p, v := range row {
			vs[v].pos = p
		}
	}
	return best
}

func cloneRows(rows [][]int) [][]int {
	out := make([][]int, len(rows))
	for i, r := range rows {
		out[i] = slices.Clone(r)
	}
	return out
}

// orderBy sorts a layer by the mean position of each vertex's neighbours
// in the adjacent layer; a vertex without neighbours keeps its position.
// The sort is stable, so ties keep the current order.
func orderBy(vs []vertex, row []int, adj func(int) []int) {
	key := make(map[int]float64, len(row))
	for _, v := range row {
		nb := adj(v)
		if len(nb) == 0 {
			key[v] = float64(vs[v].pos)
			continue
		}
		sum := 0
		for _, u := range nb {
			sum += vs[u].pos
		}
		key[v] = float64(sum) / float64(len(nb))
	}
	sort.SliceStable(row, func(i, j int) bool { return key[row[i]] < key[row[j]] })
	for p, v := range row {
		vs[v].pos = p
	}
}

// countCrossings counts crossings between each pair of adjacent layers:
// the inversions of the lower ends when edges are sorted by upper end,
// counted with a Fenwick tree (E log V).
func countCrossings(vs []vertex, rows [][]int) int {
	total := 0
	for l := 0; l+1 < len(rows); l++ {
		type pair struct{ a, b int }
		var ps []pair
		for _, u := range rows[l] {
			for _, d := range vs[u].down {
				ps = append(ps, pair{vs[u].pos, vs[d].pos})
			}
		}
		sort.Slice(ps, func(i, j int) bool {
			if ps[i].a != ps[j].a {
				return ps[i].a < ps[j].a
			}
			return ps[i].b < ps[j].b
		})
		size := len(rows[l+1])
		tree := make([]int, size+1)
		seen := 0
		for _, p := range ps {
			// Edges already seen ending to the right of p.b cross it.
			le := 0
			for i := p.b + 1; i > 0; i -= i & -i {
				le += tree[i]
			}
			total += seen - le
			for i := p.b + 1; i <= size; i += i & -i {
				tree[i]++
			}
			seen++
		}
	}
	return total
}

// assignX places each layer's vertices left to right at their least
// separation, then lets them drift towards their neighbours' mean x (above
// on down passes, below on up passes) while keeping the separation.
func assignX(vs []vertex, rows [][]int, gap float64) {
	for _, row := range rows {
		x := 0.0
		for i, v := range row {
			if i > 0 {
				x += vs[row[i-1]].width/2 + gap + vs[v].width/2
			}
			vs[v].x = x
		}
	}
	for pass := range coordPasses {
		if pass%2 == 0 {
			for l := 1; l < len(rows); l++ {
				place(vs, rows[l], gap, func(v int) []int { return vs[v].up })
			}
		} else {
			for l := len(rows) - 2; l >= 0; l-- {
				place(vs, rows[l], gap, func(v int) []int { return vs[v].down })
			}
		}
	}
}

// place moves a layer's vertices to their neighbours' mean x, then
// resolves overlaps keeping the order: a left-to-right pass pushes right,
// a right-to-left pass pulls back towards the wanted positions, and the
// mean of the two is taken, which keeps the layer centred on its wishes.
func place(vs []vertex, row []int, gap float64, adj func(int) []int) {
	want := make([]float64, len(row))
	for i, v := range row {
		want[i] = vs[v].x
		if nb := adj(v); len(nb) > 0 {
			sum := 0.0
			for _, u := range nb {
				sum += vs[u].x
			}
			want[i] = sum / float64(len(nb))
		}
	}
	sep := func(i int) float64 { return vs[row[i-1]].width/2 + gap + vs[row[i]].width/2 }
	left := slices.Clone(want)
	for i := 1; i < len(row); i++ {
		left[i] = math.Max(left[i], left[i-1]+sep(i))
	}
	right := slices.Clone(want)
	for i := len(row) - 2; i >= 0; i-- {
		right[i] = math.Min(right[i], right[i+1]-sep(i+1))
	}
	for i, v := range row {
		vs[v].x = (left[i] + right[i]) / 2
	}
	// The mean of two separated sequences is separated; round-off aside.
	for i := 1; i < len(row); i++ {
		if d := vs[row[i-1]].x + sep(i); vs[row[i]].x < d {
			vs[row[i]].x = d
		}
	}
}

// String describes a layout briefly, for test failures.
func (l Layout) String() string {
	return fmt.Sprintf("%d nodes, %d edges, %d layers, %d crossings, %dx%d",
		len(l.Nodes), len(l.Routes), l.Layers, l.Crossings, l.Width, l.Height)
}
