// Package chart draws small time-series charts as SVG on the server: the
// dashboard's token use over time, per project and per agent. A chart is
// lines over a time axis with labelled ticks and a legend; each series has
// a colour of the Okabe–Ito palette and a marker shape of its own, and each
// point carries a <title> with its series, time and value, so the chart
// reads without colour and without JavaScript. The same input draws the
// same bytes.
package chart

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"time"
)

// Defaults of a chart's size, in SVG user units (pixels).
const (
	DefaultWidth  = 720
	DefaultHeight = 260
	// legendRow is the height of one legend line; plot margins follow.
	legendRow              = 16
	marginLeft, marginTop  = 64, 24
	marginRight, marginBot = 16, 28
	// yTicks is about how many value ticks the axis gets.
	yTicks = 5
)

// Colours are the series' colours in order (Okabe–Ito, without the yellow
// that does not read on white); series beyond them reuse them with another
// marker shape.
var Colours = []string{"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000"}

// markers are the point shapes, cycled more slowly than the colours.
var markers = []string{"circle", "square", "diamond"}

// Point is one value at one time.
type Point struct {
	T time.Time
	V float64
}

// Series is a named line; its points are drawn in the order given (sort
// them by time).
type Series struct {
	Name   string
	Points []Point
}

// Chart is what to draw.
type Chart struct {
	// Title labels the chart for assistive technology; Unit names the
	// values ("tokens").
	Title, Unit   string
	Series        []Series
	Width, Height int
	// From and To bound the time axis; zero takes the points' range.
	From, To time.Time
}

// WriteSVG draws c.
func WriteSVG(w io.Writer, c Chart) error {
	if c.Width <= 0 {
		c.Width = DefaultWidth
	}
	if c.Height <= 0 {
		c.Height = DefaultHeight
	}
	from, to, top := c.From, c.To, 0.0
	for _, s := range c.Series {
		for _, p := range s.Points {
			if c.From.IsZero() && (from.IsZero() || p.T.Before(from)) {
				from = p.T
			}
			if c.To.IsZero() && (to.IsZero() || p.T.After(to)) {
				to = p.T
			}
			top = math.Max(top, p.V)
		}
	}
	if !to.After(from) {
		to = from.Add(time.Hour)
	}
	step, ymax := niceScale(top)
	legendH := legendRow * len(c.Series)
	plotL, plotT := marginLeft, marginTop
	plotW := c.Width - marginLeft - marginRight
	plotH := c.Height - marginTop - marginBot - legendH
	if plotH < 40 {
		plotH = 40
		c.Height = marginTop + marginBot + legendH + plotH
	}
	span := to.Sub(from).Seconds()
	xOf := func(t time.Time) int {
		return plotL + int(math.Round(t.Sub(from).Seconds()/span*float64(plotW)))
	}
	yOf := func(v float64) int { return plotT + plotH - int(math.Round(v/ymax*float64(plotH))) }

	b := bufio.NewWriter(w)
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" aria-label="%s" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		esc(c.Title), c.Width, c.Height, c.Width, c.Height)
	p("<title>%s</title>\n", esc(c.Title))
	// Value axis with grid lines.
	p(`<g class="y-axis" stroke="#dddddd">` + "\n")
	for v := 0.0; v <= ymax+step/2; v += step {
		y := yOf(v)
		p(`<line x1="%d" y1="%d" x2="%d" y2="%d"/><text x="%d" y="%d" text-anchor="end" stroke="none" fill="#333333">%s</text>`+"\n",
			plotL, y, plotL+plotW, y, plotL-6, y+4, esc(Count(v)))
	}
	p("</g>\n")
	// Time axis.
	p(`<g class="x-axis" fill="#333333">` + "\n")
	p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333333"/>`+"\n", plotL, plotT+plotH, plotL+plotW, plotT+plotH)
	for _, t := range timeTicks(from, to) {
		x := xOf(t)
		p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333333"/><text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n",
			x, plotT+plotH, x, plotT+plotH+4, x, plotT+plotH+16, esc(timeLabel(t, to.Sub(from))))
	}
	p("</g>\n")
	if c.Unit != "" {
		p(`<text x="4" y="12" fill="#333333">%s</text>`+"\n", esc(c.Unit))
	}
	for i, s := range c.Series {
		colour := Colours[i%len(Colours)]
		marker := markers[(i/len(Colours))%len(markers)]
		p(`<g class="series" data-series="%s" stroke="%s" fill="%s">`+"\n", esc(s.Name), colour, colour)
		if len(s.Points) > 1 {
			p(`<polyline fill="none" stroke-width="2" points="`)
			for j, pt := range s.Points {
				if j > 0 {
					p(" ")
				}
				p("%d,%d", xOf(pt.T), yOf(pt.V))
			}
			p(`"/>` + "\n")
		}
		for _, pt := range s.Points {
			p("%s<title>%s %s: %s %s</title>%s\n", shapeOpen(marker, xOf(pt.T), yOf(pt.V)), esc(s.Name),
				pt.T.UTC().Format("2006-01-02 15:04"), esc(Count(pt.V)), esc(c.Unit), shapeClose(marker))
		}
		p("</g>\n")
		// Legend line.
		ly := c.Height - legendH + i*legendRow + 2
		p(`<g class="legend" fill="%s">%s</g><text x="%d" y="%d" fill="#333333">%s</text>`+"\n",
			colour, shapeOpen(marker, plotL+5, ly+6)+shapeClose(marker), plotL+16, ly+10, esc(s.Name))
	}
	p("</svg>\n")
	return b.Flush()
}

func shapeOpen(marker string, x, y int) string {
	switch marker {
	case "square":
		return fmt.Sprintf(`<rect x="%d" y="%d" width="7" height="7">`, x-3, y-3)
	case "diamond":
		return fmt.Sprintf(`<path d="M%d,%dL%d,%dL%d,%dL%d,%dz">`, x, y-5, x+5, y, x, y+5, x-5, y)
	}
	return fmt.Sprintf(`<circle cx="%d" cy="%d" r="3.5">`, x, y)
}

func shapeClose(marker string) string {
	switch marker {
	case "square":
		return "</rect>"
	case "diamond":
		return "</path>"
	}
	return "</circle>"
}

// niceScale picks a tick step of 1, 2 or 5 times a power of ten and the
// axis top (a multiple of the step at or above top).
func niceScale(top float64) (step, ymax float64) {
	if top <= 0 {
		return 1, yTicks
	}
	raw := top / yTicks
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / mag; {
	case f <= 1:
		step = mag
	case f <= 2:
		step = 2 * mag
	case f <= 5:
		step = 5 * mag
	default:
		step = 10 * mag
	}
	if step < 1 {
		step = 1
	}
	return step, math.Ceil(top/step) * step
}

// tickSteps are the time steps ticks may use, shortest first.
var tickSteps = []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour,
	3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour, 30 * 24 * time.Hour}

// timeTicks returns at most about eight round times in [from, to].
func timeTicks(from, to time.Time) []time.Time {
	span := to.Sub(from)
	step := tickSteps[len(tickSteps)-1]
	for _, s := range tickSteps {
		if span/s <= 8 {
			step = s
			break
		}
	}
	var out []time.Time
	for t := from.UTC().Truncate(step); !t.After(to); t = t.Add(step) {
		if !t.Before(from) {
			out = append(out, t)
		}
	}
	return out
}

func timeLabel(t time.Time, span time.Duration) string {
	switch {
	case span > 3*24*time.Hour:
		return t.UTC().Format("Jan 2")
	case span > 24*time.Hour:
		return t.UTC().Format("Jan 2 15:04")
	}
	return t.UTC().Format("15:04")
}

// Count writes a count briefly: 950, 12.5k, 3.2M.
func Count(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e9:
		return trim(v/1e9) + "G"
	case a >= 1e6:
		return trim(v/1e6) + "M"
	case a >= 1e3:
		return trim(v/1e3) + "k"
	}
	return trim(v)
}

func trim(v float64) string {
	s := strconv.FormatFloat(v, 'f', 1, 64)
	if len(s) > 2 && s[len(s)-2:] == ".0" {
		s = s[:len(s)-2]
	}
	return s
}

func esc(s string) string { return html.EscapeString(s) }
