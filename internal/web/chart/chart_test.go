package chart_test

import (
	"bytes"
	"encoding/xml"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/web/chart"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

var t0 = time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)

func at(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }

func TestWriteSVGGolden(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		c    chart.Chart
	}{
		{"two-projects", chart.Chart{Title: "Tokens per hour by project", Unit: "tokens", Series: []chart.Series{
			{Name: "web", Points: []chart.Point{{at(0), 1200}, {at(1), 45000}, {at(2), 30000}, {at(3), 0}}},
			{Name: "api <v2>", Points: []chart.Point{{at(1), 5000}, {at(2), 81000}}},
		}}},
		{"empty", chart.Chart{Title: "No usage", Unit: "tokens", From: at(0), To: at(24)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			if err := chart.WriteSVG(&b, tc.c); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tc.name+".svg")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden file (run with -update to create it): %v", err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Fatalf("%s differs (run with -update after checking):\n%s", path, b.Bytes())
			}
		})
	}
}

// TestPointsInsidePlot checks that every point is drawn inside the plot,
// higher values higher up, later times further right.
func TestPointsInsidePlot(t *testing.T) {
	t.Parallel()
	c := chart.Chart{Title: "t", Width: 500, Height: 300, Series: []chart.Series{
		{Name: "a", Points: []chart.Point{{at(0), 10}, {at(5), 999}, {at(10), 500}}},
	}}
	var b bytes.Buffer
	if err := chart.WriteSVG(&b, c); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`<circle cx="(\d+)" cy="(\d+)" r="3.5"><title>a `)
	m := re.FindAllStringSubmatch(b.String(), -1)
	if len(m) != 3 {
		t.Fatalf("got %d points, want 3:\n%s", len(m), b.String())
	}
	var xs, ys []int
	for _, s := range m {
		x, _ := strconv.Atoi(s[1])
		y, _ := strconv.Atoi(s[2])
		if x < 0 || x > c.Width || y < 0 || y > c.Height {
			t.Fatalf("point (%d,%d) outside the %dx%d chart", x, y, c.Width, c.Height)
		}
		xs, ys = append(xs, x), append(ys, y)
	}
	if !(xs[0] < xs[1] && xs[1] < xs[2]) {
		t.Errorf("x not increasing with time: %v", xs)
	}
	if !(ys[1] < ys[2] && ys[2] < ys[0]) {
		t.Errorf("y not following the values 10, 999, 500: %v", ys)
	}
	if !strings.Contains(b.String(), "<title>a 2026-11-28 14:00: 999 </title>") {
		t.Errorf("point lacks its title:\n%s", b.String())
	}
}

func TestCount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    float64
		want string
	}{{0, "0"}, {950, "950"}, {1000, "1k"}, {12500, "12.5k"}, {3_240_000, "3.2M"}, {2e9, "2G"}} {
		if got := chart.Count(tc.v); got != tc.want {
			t.Errorf("Count(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// TestWriteSVGEscapesHostileText: the title, the unit and the series'
// names come out as text and attribute values, never as markup.
func TestWriteSVGEscapesHostileText(t *testing.T) {
	t.Parallel()
	for _, h := range []string{`</title><script>alert(1)</script>`, `"><svg onload=alert(1)>`, `' onmouseover='alert(1)`} {
		c := chart.Chart{Title: h, Unit: h, Series: []chart.Series{
			{Name: h, Points: []chart.Point{{at(0), 10}, {at(1), 20}}},
			{Name: "b" + h, Points: []chart.Point{{at(0), 5}}},
		}}
		var b bytes.Buffer
		if err := chart.WriteSVG(&b, c); err != nil {
			t.Fatal(err)
		}
		svg := b.String()
		d := xml.NewDecoder(strings.NewReader(svg))
		svgs, seen := 0, false
		for {
			tok, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%q: the SVG is not well-formed: %v\n%s", h, err, svg)
			}
			switch x := tok.(type) {
			case xml.StartElement:
				if x.Name.Local == "svg" {
					svgs++
				}
				if x.Name.Local == "script" || x.Name.Local == "foreignObject" {
					t.Fatalf("%q: the SVG holds a <%s>:\n%s", h, x.Name.Local, svg)
				}
				for _, a := range x.Attr {
					if strings.HasPrefix(strings.ToLower(a.Name.Local), "on") {
						t.Fatalf("%q: the SVG has an attribute %s:\n%s", h, a.Name.Local, svg)
					}
					seen = seen || strings.Contains(a.Value, h)
				}
			case xml.CharData:
				seen = seen || strings.Contains(string(x), h)
			}
		}
		if svgs != 1 || !seen {
			t.Fatalf("%q: %d <svg> elements, text shown %v:\n%s", h, svgs, seen, svg)
		}
	}
}
