package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// A small hand-written SVG of empirical CDFs: two panels side by side. A
// plotting library would pull a font and image stack into the module for two
// line charts.

type series struct {
	name   string
	values []float64
}

type panel struct {
	title  string
	log    bool
	series []series
}

var colors = []string{"#1f77b4", "#d62728", "#7f7f7f"}

func chart(panels ...panel) string {
	const w, h, pad = 460.0, 320.0, 50.0
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", w*float64(len(panels)), h)
	for i, p := range panels {
		x0 := float64(i) * w
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, s := range p.series {
			for _, v := range s.values {
				if v > 0 {
					lo, hi = math.Min(lo, v), math.Max(hi, v)
				}
			}
		}
		scale := func(v float64) float64 {
			if p.log {
				return (math.Log10(math.Max(v, lo)) - math.Log10(lo)) / (math.Log10(hi) - math.Log10(lo) + 1e-9)
			}
			return (v - lo) / (hi - lo + 1e-9)
		}
		left, right, top, bottom := x0+pad, x0+w-20, 30.0, h-pad
		fmt.Fprintf(&b, `<text x="%.0f" y="18" font-size="13">%s</text>`+"\n", left, p.title)
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`+"\n", left, top, right-left, bottom-top)
		for _, q := range []float64{0, 0.5, 0.9, 0.99} {
			y := bottom - q*(bottom-top)
			fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">%g</text>`+"\n", left-4, y+4, q)
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="start">%.3g</text><text x="%.0f" y="%.0f" text-anchor="end">%.3g</text>`+"\n",
			left, bottom+14, lo, right, bottom+14, hi)
		for j, s := range p.series {
			v := slices.Sorted(slices.Values(s.values))
			var pts []string
			for k, x := range v {
				px := left + scale(x)*(right-left)
				py := bottom - float64(k+1)/float64(len(v))*(bottom-top)
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, py))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", colors[j%len(colors)], strings.Join(pts, " "))
			fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" fill="%s">%s</text>`+"\n", left+8, top+14+float64(j)*14, colors[j%len(colors)], s.name)
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">x: time; y: fraction of answers within x (CDF)</text>`+"\n", (left+right)/2, h-12)
	}
	b.WriteString("</svg>\n")
	return b.String()
}
