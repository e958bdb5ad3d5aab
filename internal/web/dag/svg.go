package dag

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Colour is a status's fill, the text colour that reads on it, and its
// border: Stroke drawn boldStroke wide, or the usual thin dark border when
// Stroke is empty.
type Colour struct{ Fill, Text, Stroke string }

// Borders of a box: the usual one, and the bold one of a status whose
// Colour names a Stroke.
const (
	defaultStroke = "#333333"
	boldStroke    = "3"
)

// The Okabe–Ito palette (distinguishable with the common colour-vision
// deficiencies), plus a grey for work not yet ready. Work waiting for a
// person's approval is a pale orange box with a bold orange border, told
// from the solid orange of work being verified or waiting to land by its
// lightness and its border, not by its hue alone.
var palette = map[models.TaskStatus]Colour{
	models.StatusDefined:          {"#d9d9d9", "#000000", ""},
	models.StatusReady:            {"#56b4e9", "#000000", ""}, // sky blue
	models.StatusAssigned:         {"#0072b2", "#ffffff", ""}, // blue
	models.StatusInProgress:       {"#0072b2", "#ffffff", ""},
	models.StatusWaitingInput:     {"#f0e442", "#000000", ""}, // yellow
	models.StatusPaused:           {"#cc79a7", "#000000", ""}, // reddish purple
	models.StatusVerifying:        {"#e69f00", "#000000", ""}, // orange
	models.StatusAwaitingApproval: {"#fde3b4", "#000000", "#e69f00"},
	models.StatusCompleted:        {"#009e73", "#ffffff", ""}, // bluish green
	models.StatusFailed:           {"#d55e00", "#ffffff", ""}, // vermillion
	models.StatusBlocked:          {"#000000", "#ffffff", ""},
}

// unknownColour draws a status the palette does not know.
var unknownColour = Colour{"#ffffff", "#000000", ""}

// border is the stroke colour and width of a box of colour c.
func (c Colour) border() (stroke, width string) {
	if c.Stroke != "" {
		return c.Stroke, boldStroke
	}
	return defaultStroke, "1"
}

// RootCauseStroke outlines a cascade's root cause.
const RootCauseStroke = "#d55e00"

// StatusColor is the fill and text colour of a task status's boxes, the
// same in every graph and legend of the dashboard.
func StatusColor(s models.TaskStatus) Colour {
	if c, ok := palette[s]; ok {
		return c
	}
	return unknownColour
}

// maxLabel bounds a box's label in characters; the full text is in the
// title.
const maxLabel = 22

// WriteSVG writes the layout as a standalone <svg> element (inline in HTML
// or served as image/svg+xml). Each node is a link to its Href with a
// <title> naming the task, its status and whether it is a root cause.
func WriteSVG(w io.Writer, l Layout, label string) error {
	b := bufio.NewWriter(w)
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" class="dag" role="img" aria-label="%s" width="%d" height="%d" viewBox="0 0 %d %d">`+"\n",
		esc(label), l.Width, l.Height, l.Width, l.Height)
	p(`<defs><marker id="dag-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#555555"/></marker></defs>` + "\n")
	p(`<g class="edges" fill="none" stroke="#555555" stroke-width="1.5">` + "\n")
	for _, r := range l.Routes {
		var d strings.Builder
		for i, pt := range r.Points {
			if i == 0 {
				d.WriteString("M")
			} else {
				d.WriteString("L")
			}
			d.WriteString(strconv.Itoa(pt.X))
			d.WriteByte(',')
			d.WriteString(strconv.Itoa(pt.Y))
		}
		dash := ""
		if r.Soft {
			dash = ` stroke-dasharray="5,4"`
		}
		p(`<path d="%s" marker-end="url(#dag-arrow)"%s data-from="%s" data-to="%s"/>`+"\n",
			d.String(), dash, esc(r.Upstream), esc(r.Downstream))
	}
	p("</g>\n<g class=\"nodes\" font-family=\"sans-serif\" font-size=\"12\">\n")
	for _, n := range l.Nodes {
		c := StatusColor(n.Status)
		title := n.ID
		if n.Label != "" && n.Label != n.ID {
			title += ": " + n.Label
		}
		if n.Status != "" {
			title += " — " + string(n.Status)
		}
		if n.Note != "" {
			title += " (" + n.Note + ")"
		}
		if n.RootCause {
			title += " (root cause)"
		}
		open, closeTag := "<g", "</g>"
		if n.Href != "" {
			open, closeTag = fmt.Sprintf(`<a href="%s"`, esc(n.Href)), "</a>"
		}
		classes := "node"
		if n.Status.Valid() { // a known status only: the class is not text from elsewhere
			classes += " st-" + strings.ToLower(string(n.Status))
		}
		if n.RootCause {
			classes += " root-cause"
		}
		if n.Focus {
			classes += " focus"
		}
		p(`%s class="%s" data-id="%s" data-status="%s"><title>%s</title>`+"\n", open, esc(classes), esc(n.ID), esc(string(n.Status)), esc(title))
		stroke, width := c.border()
		dash := ""
		switch {
		case n.RootCause:
			stroke, width, dash = RootCauseStroke, "4", ` stroke-dasharray="8,4"`
		case n.Focus:
			stroke, width = "#000000", "3"
		}
		p(`<rect x="%d" y="%d" width="%d" height="%d" rx="6" fill="%s" stroke="%s" stroke-width="%s"%s/>`+"\n",
			n.X, n.Y, n.W, n.H, c.Fill, stroke, width, dash)
		var parts []string
		for _, part := range []string{string(n.Status), rootCauseText(n.RootCause), n.Note} {
			if part != "" {
				parts = append(parts, part)
			}
		}
		second := strings.Join(parts, " · ")
		first := n.Label
		if first == "" {
			first = n.ID
		}
		mid := n.X + n.W/2
		p(`<text x="%d" y="%d" text-anchor="middle" fill="%s">%s</text>`+"\n", mid, n.Y+n.H/2-3, c.Text, esc(truncate(first, maxLabel)))
		p(`<text x="%d" y="%d" text-anchor="middle" fill="%s" font-size="10">%s</text>`+"\n", mid, n.Y+n.H/2+11, c.Text, esc(truncate(second, maxLabel+6)))
		p("%s\n", closeTag)
	}
	p("</g>\n</svg>\n")
	return b.Flush()
}

// WriteLegend writes a small SVG legend of the status colours, each with
// its status's name.
func WriteLegend(w io.Writer) error {
	b := bufio.NewWriter(w)
	const row = 18
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" class="dag-legend" role="img" aria-label="status colours" width="190" height="%d" font-family="sans-serif" font-size="12">`+"\n", len(models.TaskStatuses)*row+4)
	for i, s := range models.TaskStatuses {
		c := StatusColor(s)
		y := 2 + i*row
		stroke, width := c.border()
		fmt.Fprintf(b, `<rect x="2" y="%d" width="24" height="14" rx="3" fill="%s" stroke="%s" stroke-width="%s"/><text x="32" y="%d">%s</text>`+"\n",
			y, c.Fill, stroke, width, y+11, s)
	}
	fmt.Fprintf(b, "</svg>\n")
	return b.Flush()
}

func rootCauseText(b bool) string {
	if b {
		return "root cause"
	}
	return ""
}

func esc(s string) string { return html.EscapeString(s) }

// truncate shortens s to at most n characters, ending in "…" when cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
