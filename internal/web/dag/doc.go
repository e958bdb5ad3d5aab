// Package dag lays out task graphs and draws them as SVG on the server, so
// the dashboard's graphs read without JavaScript and a project of 1,000
// open tasks renders in milliseconds.
//
// The layout is layered (Sugiyama style), top to bottom, every edge
// pointing downward:
//
//  1. Cycles (which the store refuses, but a drawing must survive) are
//     broken by turning back edges around, found depth first in input
//     order.
//  2. Layering is longest path from the sources: a node sits one layer
//     below its deepest upstream.
//  3. An edge spanning several layers, at most MaxBendSpan, passes through
//     one dummy point per layer it crosses, so edges bend around nodes
//     instead of through them. A longer edge is drawn straight and takes
//     no part in ordering the layers (nor in Layout.Crossings): the dummy
//     points stay linear in the edges, where a deep chain with an edge
//     from its first task to every other would have a quadratic number.
//  4. Crossings are reduced by barycenter sweeps (down, then up), at most
//     MaxSweeps of them and at least one each way; the order with the
//     fewest crossings seen is kept (the later one on a tie).
//  5. Coordinates: each node moves towards the mean x of its neighbours in
//     the layer above, then below, with a minimum separation kept between
//     neighbours in a layer, for a bounded number of passes.
//  6. The edges leaving a box, and those arriving, touch it at distinct
//     points spread over its middle, in the order of their other ends.
//
// The output depends only on the input's order and content: the same graph
// draws the same bytes (golden files under testdata guard this).
//
// Nodes are filled by task status with one colour-blind-safe palette (the
// Okabe–Ito colours, StatusColor); the status is also written in the node
// and in its title, so colour is never the only cue. Each node links to its
// task's page. A root cause (RootCauses) is outlined with a thick dashed
// border and named as such in its title.
package dag
