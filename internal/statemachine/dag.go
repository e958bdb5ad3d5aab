package statemachine

import (
	"fmt"
	"slices"
)

// CyclicDependencyError reports a cycle in a dependency graph. From and To
// name the back edge (From depends on To) when known.
type CyclicDependencyError struct {
	From, To string
}

// Error returns "from -> to" naming the back edge, or "Cyclic dependency
// detected" when the edge is unknown.
func (e *CyclicDependencyError) Error() string {
	if e.From == "" && e.To == "" {
		return "Cyclic dependency detected"
	}
	return fmt.Sprintf("%s -> %s", e.From, e.To)
}

const (
	white = iota
	gray
	black
)

// ValidateDAG checks that graph (task id → ids it depends on) has no cycle.
// Nodes are the keys and the values. It uses a three-colour depth-first
// search, iteratively so deep chains cannot overflow the stack, visiting
// nodes in sorted order so the reported back edge is deterministic. graph is
// not modified.
func ValidateDAG(graph map[string][]string) error {
	color := make(map[string]uint8, len(graph))
	for n, deps := range graph {
		color[n] = white
		for _, d := range deps {
			color[d] = white
		}
	}
	nodes := make([]string, 0, len(color))
	for n := range color {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)

	type frame struct {
		node string
		next int
	}
	var stack []frame
	for _, start := range nodes {
		if color[start] != white {
			continue
		}
		color[start] = gray
		stack = append(stack[:0], frame{node: start})
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			deps := graph[top.node]
			if top.next >= len(deps) {
				color[top.node] = black
				stack = stack[:len(stack)-1]
				continue
			}
			dep := deps[top.next]
			top.next++
			switch color[dep] {
			case gray:
				return &CyclicDependencyError{From: top.node, To: dep}
			case white:
				color[dep] = gray
				stack = append(stack, frame{node: dep})
			}
		}
	}
	return nil
}

// ValidateDAGWithNewEdge checks that graph stays acyclic when taskID also
// depends on dependsOn. graph is not modified.
func ValidateDAGWithNewEdge(graph map[string][]string, taskID, dependsOn string) error {
	if taskID == dependsOn {
		return &CyclicDependencyError{From: taskID, To: dependsOn}
	}
	g := make(map[string][]string, len(graph)+1)
	for k, v := range graph {
		g[k] = v
	}
	deps := make([]string, 0, len(graph[taskID])+1)
	deps = append(deps, graph[taskID]...)
	g[taskID] = append(deps, dependsOn)
	return ValidateDAG(g)
}
