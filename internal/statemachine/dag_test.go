package statemachine_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/agentqueued/agentqueued/internal/statemachine"
)

// deepCopy returns a copy of g that shares no slice with it.
func deepCopy(g map[string][]string) map[string][]string {
	if g == nil {
		return nil
	}
	c := make(map[string][]string, len(g))
	for k, v := range g {
		if v == nil {
			c[k] = nil
			continue
		}
		c[k] = append(make([]string, 0, len(v)), v...)
	}
	return c
}

// chain returns the graph n0 -> n1 -> ... -> n(size-1), each node depending
// on the next; node names sort in chain order.
func chain(size int) map[string][]string {
	g := make(map[string][]string, size)
	for i := range size - 1 {
		g[chainNode(i)] = []string{chainNode(i + 1)}
	}
	return g
}

func chainNode(i int) string { return fmt.Sprintf("n%06d", i) }

// checkCycle asserts that err is a *CyclicDependencyError with the message
// want ("" means any back edge).
func checkCycle(t *testing.T, err error, want string) {
	t.Helper()
	var cyc *statemachine.CyclicDependencyError
	if !errors.As(err, &cyc) {
		t.Fatalf("error = %v (%T), want *CyclicDependencyError", err, err)
	}
	if cyc.From == "" || cyc.To == "" {
		t.Errorf("back edge = {%q, %q}, want both ends named", cyc.From, cyc.To)
	}
	if want != "" && err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	if got := fmt.Sprintf("%s -> %s", cyc.From, cyc.To); got != err.Error() {
		t.Errorf("Error() = %q, want %q", err.Error(), got)
	}
}

func TestValidateDAG(t *testing.T) {
	t.Parallel()
	closedChain := chain(100_000)
	closedChain[chainNode(99_999)] = []string{chainNode(0)}

	tests := []struct {
		name  string
		graph map[string][]string
		want  string // "" means acyclic
	}{
		{"nil graph", nil, ""},
		{"empty graph", map[string][]string{}, ""},
		{"single node without deps", map[string][]string{"a": nil}, ""},
		{"single node with empty deps", map[string][]string{"a": {}}, ""},
		{"single edge", map[string][]string{"a": {"b"}}, ""},
		{"chain", map[string][]string{"a": {"b"}, "b": {"c"}, "c": {"d"}}, ""},
		{"diamond", map[string][]string{"a": {"b", "c"}, "b": {"d"}, "c": {"d"}, "d": nil}, ""},
		{"shared leaf reached twice", map[string][]string{"a": {"z"}, "b": {"z"}, "c": {"a", "b", "z"}}, ""},
		{"duplicate edge", map[string][]string{"a": {"b", "b"}}, ""},
		{"self-loop", map[string][]string{"a": {"a"}}, "a -> a"},
		{"self-loop beside other deps", map[string][]string{"a": {"b", "a"}, "b": nil}, "a -> a"},
		{"two-cycle", map[string][]string{"a": {"b"}, "b": {"a"}}, "b -> a"},
		{"three-cycle", map[string][]string{"a": {"b"}, "b": {"c"}, "c": {"a"}}, "c -> a"},
		{"three-cycle listed backwards", map[string][]string{"c": {"b"}, "b": {"a"}, "a": {"c"}}, "b -> a"},
		{
			"value-only nodes are visited and are not cycles",
			map[string][]string{"b": {"a"}, "c": {"a", "b"}},
			"",
		},
		{
			// "a" appears only as a value and sorts first, so it is visited
			// first; the cycle c -> d -> c is entered from "b" through a tail.
			"cycle behind a value-only node and a tail",
			map[string][]string{"b": {"a", "c"}, "c": {"a", "d"}, "d": {"c"}},
			"d -> c",
		},
		{
			"cycle reached only through an entry node",
			map[string][]string{"a": {"b"}, "b": {"c"}, "c": {"d"}, "d": {"b"}},
			"d -> b",
		},
		{
			"disconnected components, one acyclic",
			map[string][]string{"a": {"b"}, "b": {"c"}, "x": {"y"}, "y": {"z"}},
			"",
		},
		{
			"disconnected components, second has a cycle",
			map[string][]string{"a": {"b"}, "b": {"c"}, "x": {"y"}, "y": {"z"}, "z": {"x"}},
			"z -> x",
		},
		{"deep chain", chain(100_000), ""},
		{"deep chain closed into a cycle", closedChain, "n099999 -> n000000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			before := deepCopy(tc.graph)
			err := statemachine.ValidateDAG(tc.graph)
			if tc.want == "" {
				if err != nil {
					t.Errorf("ValidateDAG = %v, want nil", err)
				}
			} else {
				checkCycle(t, err, tc.want)
			}
			if !reflect.DeepEqual(tc.graph, before) {
				t.Error("ValidateDAG modified its argument")
			}
		})
	}
}

// TestValidateDAGDeterministic runs the same cyclic graph many times: map
// iteration order varies between runs, the reported back edge must not.
func TestValidateDAGDeterministic(t *testing.T) {
	t.Parallel()
	g := map[string][]string{
		"p": {"q"}, "q": {"r"}, "r": {"p"},
		"e": {"f"}, "f": {"g"}, "g": {"e"},
		"m": {"e", "p"},
	}
	for range 200 {
		err := statemachine.ValidateDAG(g)
		checkCycle(t, err, "g -> e")
	}
}

func TestCyclicDependencyErrorMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  *statemachine.CyclicDependencyError
		want string
	}{
		{&statemachine.CyclicDependencyError{}, "Cyclic dependency detected"},
		{&statemachine.CyclicDependencyError{From: "a", To: "b"}, "a -> b"},
		{&statemachine.CyclicDependencyError{From: "t-1", To: "t-1"}, "t-1 -> t-1"},
	}
	for _, tc := range tests {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%+v.Error() = %q, want %q", *tc.err, got, tc.want)
		}
	}
	var cyc *statemachine.CyclicDependencyError
	if !errors.As(fmt.Errorf("batch: %w", tests[1].err), &cyc) || cyc.From != "a" || cyc.To != "b" {
		t.Errorf("errors.As through a wrap = %+v", cyc)
	}
}

func TestValidateDAGWithNewEdge(t *testing.T) {
	t.Parallel()
	base := map[string][]string{"a": {"b"}, "b": {"c"}, "d": nil}
	tests := []struct {
		name      string
		graph     map[string][]string
		task, dep string
		want      string // "" means accepted; "*" means any back edge
	}{
		{"safe edge to a new node", base, "c", "e", ""},
		{"safe edge between existing nodes", base, "a", "d", ""},
		{"edge already present", base, "a", "b", ""},
		{"shortcut along the chain", base, "a", "c", ""},
		{"edge closing a two-cycle", base, "b", "a", "b -> a"},
		{"edge closing a three-cycle", base, "c", "a", "c -> a"},
		{"self edge", base, "a", "a", "a -> a"},
		{"self edge on an unknown task", base, "z", "z", "z -> z"},
		{"task not yet a key", base, "new", "a", ""},
		{"task not yet a key, dep unknown", base, "new", "other", ""},
		{"nil graph", nil, "x", "y", ""},
		{"edge into an existing cycle", map[string][]string{"p": {"q"}, "q": {"p"}}, "r", "p", "*"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			before := deepCopy(tc.graph)
			err := statemachine.ValidateDAGWithNewEdge(tc.graph, tc.task, tc.dep)
			switch tc.want {
			case "":
				if err != nil {
					t.Errorf("ValidateDAGWithNewEdge(%s -> %s) = %v, want nil", tc.task, tc.dep, err)
				}
			case "*":
				checkCycle(t, err, "")
			default:
				checkCycle(t, err, tc.want)
			}
			if !reflect.DeepEqual(tc.graph, before) {
				t.Error("ValidateDAGWithNewEdge modified its argument")
			}
		})
	}
}

// TestValidatorsKeepSpareCapacity gives the validators slices with spare
// capacity: an append to the caller's slice would write into the spare
// room without changing its length, which reflect.DeepEqual cannot see.
func TestValidatorsKeepSpareCapacity(t *testing.T) {
	t.Parallel()
	const sentinel = "untouched"
	newGraph := func() map[string][]string {
		deps := make([]string, 1, 10)
		deps[0] = "b"
		spare := deps[:cap(deps)]
		for i := 1; i < len(spare); i++ {
			spare[i] = sentinel
		}
		return map[string][]string{"a": deps, "b": nil}
	}
	checkSpare := func(t *testing.T, g map[string][]string) {
		t.Helper()
		deps := g["a"]
		if len(deps) != 1 || cap(deps) != 10 || deps[0] != "b" {
			t.Fatalf("g[a] = %q (cap %d), want [b] (cap 10)", deps, cap(deps))
		}
		for i, v := range deps[:cap(deps)][1:] {
			if v != sentinel {
				t.Errorf("spare capacity slot %d = %q, want %q", i+1, v, sentinel)
			}
		}
	}
	tests := []struct {
		name    string
		call    func(map[string][]string) error
		wantErr bool
	}{
		{"ValidateDAG", statemachine.ValidateDAG, false},
		{"WithNewEdge safe", func(g map[string][]string) error {
			return statemachine.ValidateDAGWithNewEdge(g, "a", "c")
		}, false},
		{"WithNewEdge cycle", func(g map[string][]string) error {
			return statemachine.ValidateDAGWithNewEdge(g, "b", "a")
		}, true},
		{"WithNewEdge on the value-only node", func(g map[string][]string) error {
			return statemachine.ValidateDAGWithNewEdge(g, "b", "c")
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newGraph()
			before := deepCopy(g)
			err := tc.call(g)
			if (err != nil) != tc.wantErr {
				t.Errorf("error = %v, want error %v", err, tc.wantErr)
			}
			if !reflect.DeepEqual(g, before) {
				t.Errorf("graph = %q, want %q", g, before)
			}
			checkSpare(t, g)
		})
	}
}

// hasCycleKahn is the reference check: repeatedly remove nodes with no
// remaining dependencies; a cycle exists iff some node cannot be removed.
func hasCycleKahn(g map[string][]string) bool {
	pending := map[string]int{} // node -> number of unremoved deps (with multiplicity)
	dependents := map[string][]string{}
	for n, deps := range g {
		if _, ok := pending[n]; !ok {
			pending[n] = 0
		}
		for _, d := range deps {
			if _, ok := pending[d]; !ok {
				pending[d] = 0
			}
			pending[n]++
			dependents[d] = append(dependents[d], n)
		}
	}
	var ready []string
	for n, c := range pending {
		if c == 0 {
			ready = append(ready, n)
		}
	}
	removed := 0
	for len(ready) > 0 {
		n := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		removed++
		for _, up := range dependents[n] {
			pending[up]--
			if pending[up] == 0 {
				ready = append(ready, up)
			}
		}
	}
	return removed != len(pending)
}

// reaches reports whether to is reachable from from in g (from itself counts).
func reaches(g map[string][]string, from, to string) bool {
	seen := map[string]bool{from: true}
	stack := []string{from}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n == to {
			return true
		}
		for _, d := range g[n] {
			if !seen[d] {
				seen[d] = true
				stack = append(stack, d)
			}
		}
	}
	return false
}

// graphFromBytes builds a graph on at most eight nodes: each pair of bytes is
// one edge, the low three bits naming each end. A byte with its high bit set
// on the source only registers the source as a key without that edge.
func graphFromBytes(data []byte) map[string][]string {
	g := map[string][]string{}
	name := func(b byte) string { return string(rune('a' + b&7)) }
	for i := 0; i+1 < len(data); i += 2 {
		from, to := name(data[i]), name(data[i+1])
		if data[i]&0x80 != 0 {
			if _, ok := g[from]; !ok {
				g[from] = nil
			}
			continue
		}
		g[from] = append(g[from], to)
	}
	return g
}

// checkAgainstReference compares err, the validator's verdict on g, with the
// reference check, and checks that a reported back edge really closes a cycle.
func checkAgainstReference(t *testing.T, g map[string][]string, err error) {
	t.Helper()
	want := hasCycleKahn(g)
	if (err != nil) != want {
		t.Fatalf("graph %v: error = %v, reference says cycle = %v", g, err, want)
	}
	if err == nil {
		return
	}
	var cyc *statemachine.CyclicDependencyError
	if !errors.As(err, &cyc) {
		t.Fatalf("graph %v: error %v (%T) is not *CyclicDependencyError", g, err, err)
	}
	if !slices.Contains(g[cyc.From], cyc.To) {
		t.Fatalf("graph %v: reported edge %s is not in the graph", g, err)
	}
	if !reaches(g, cyc.To, cyc.From) {
		t.Fatalf("graph %v: reported edge %s does not close a cycle", g, err)
	}
}

func FuzzValidateDAG(f *testing.F) {
	f.Add([]byte{}, byte(0), byte(1))
	f.Add([]byte{0, 0}, byte(1), byte(2))                   // self-loop
	f.Add([]byte{0, 1, 1, 2}, byte(2), byte(0))             // chain; new edge closes it
	f.Add([]byte{0, 1, 1, 0}, byte(3), byte(4))             // two-cycle
	f.Add([]byte{0, 1, 0, 2, 1, 3, 2, 3}, byte(3), byte(0)) // diamond
	f.Add([]byte{0, 1, 1, 2, 2, 0, 5, 6}, byte(6), byte(5)) // cycle plus separate edge
	f.Add([]byte{0x80, 0, 0x81, 0, 1, 2}, byte(2), byte(2)) // keys without edges
	f.Add([]byte{7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0}, byte(0), byte(7))
	f.Fuzz(func(t *testing.T, data []byte, task, dep byte) {
		if len(data) > 64 {
			data = data[:64]
		}
		g := graphFromBytes(data)
		before := deepCopy(g)

		checkAgainstReference(t, g, statemachine.ValidateDAG(g))
		if !reflect.DeepEqual(g, before) {
			t.Fatalf("ValidateDAG modified %v into %v", before, g)
		}

		from, to := string(rune('a'+task&7)), string(rune('a'+dep&7))
		withEdge := deepCopy(g)
		withEdge[from] = append(withEdge[from], to)
		checkAgainstReference(t, withEdge, statemachine.ValidateDAGWithNewEdge(g, from, to))
		if !reflect.DeepEqual(g, before) {
			t.Fatalf("ValidateDAGWithNewEdge modified %v into %v", before, g)
		}
	})
}

// BenchmarkValidateDAG validates a random acyclic graph of 10,000 nodes and
// 30,000 distinct edges, each from a higher index to a lower one.
func BenchmarkValidateDAG(b *testing.B) {
	const nodes, edges = 10_000, 30_000
	rng := rand.New(rand.NewPCG(1, 2))
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("task-%05d", i)
	}
	g := make(map[string][]string, nodes)
	seen := make(map[[2]int]bool, edges)
	for len(seen) < edges {
		hi := 1 + rng.IntN(nodes-1)
		lo := rng.IntN(hi)
		if seen[[2]int{hi, lo}] {
			continue
		}
		seen[[2]int{hi, lo}] = true
		g[names[hi]] = append(g[names[hi]], names[lo])
	}
	if err := statemachine.ValidateDAG(g); err != nil {
		b.Fatalf("ValidateDAG on an acyclic graph: %v", err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := statemachine.ValidateDAG(g); err != nil {
			b.Fatal(err)
		}
	}
}
