// Package docs holds no code: its tests check the README and docs/ against
// the code they describe and against the shape an operator reads them in.
package docs

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/install/steps"
	"github.com/yurtdns/yurtdns/internal/layout"
)

// Paths from this directory, where go test runs.
const (
	readme    = "../README.md"
	installMD = "install.md"
)

// markdown is a Markdown file's lines, and which of them are prose: outside
// fenced code blocks, where a "#" is a shell comment, not a heading.
type markdown struct {
	lines []string
	prose []bool
}

func readMarkdown(t *testing.T, file string) markdown {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m := markdown{lines: strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")}
	fenced := false
	for _, l := range m.lines {
		fence := strings.HasPrefix(strings.TrimSpace(l), "```")
		if fence {
			fenced = !fenced
		}
		m.prose = append(m.prose, !fenced && !fence)
	}
	return m
}

// headings are the prose lines that start with prefix ("## "), without it.
func (m markdown) headings(prefix string) []string {
	var out []string
	for i, l := range m.lines {
		if m.prose[i] && strings.HasPrefix(l, prefix) {
			out = append(out, strings.TrimPrefix(l, prefix))
		}
	}
	return out
}

// anchors are the fragments GitHub gives the file's headings: lowercased,
// punctuation but "-" and "_" dropped, each space a "-", and a repeated
// one suffixed -1, -2, ...
func (m markdown) anchors() map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, h := range m.headings("#") {
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(strings.TrimLeft(h, "#"))) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// The README is an operator's guide: short, and without the test log
// (commit hashes, dated runs) that belongs in docs/.
func TestReadmeIsAGuide(t *testing.T) {
	const maxLines = 400
	m := readMarkdown(t, readme)
	if len(m.lines) > maxLines {
		t.Errorf("README.md has %d lines, at most %d: move detail into docs/", len(m.lines), maxLines)
	}
	hash := regexp.MustCompile("`[0-9a-f]{7,40}`")
	date := regexp.MustCompile(`\b20\d\d-\d\d-\d\d\b`)
	for i, l := range m.lines {
		if h := hash.FindString(l); h != "" {
			t.Errorf("README.md:%d: commit-like hash %s: runs belong in docs/ (development.md, install.md, ...)", i+1, h)
		}
		if d := date.FindString(l); d != "" {
			t.Errorf("README.md:%d: dated run %s: runs belong in docs/", i+1, d)
		}
	}
}

// The README's sections are, first, those an operator needs in the order
// they need them; reference and links may follow.
func TestReadmeSectionOrder(t *testing.T) {
	want := []string{"Does it fit", "Get", "Install", "Verify", "Upgrade", "Uninstall", "Monitoring", "Troubleshooting", "Known issues"}
	sections := readMarkdown(t, readme).headings("## ")
	for i, w := range want {
		if i >= len(sections) || !strings.HasPrefix(sections[i], w) {
			t.Fatalf("README.md's sections %q: want the first %d to start %q, in this order", sections, len(want), want)
		}
	}
}

// Every relative link of the README, docs/ and the plugins' READMEs leads to
// a file that exists and, with a fragment, to a heading of that file:
// moving a section must not leave a reader at a dead link.
func TestRelativeLinks(t *testing.T) {
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	plugins, err := filepath.Glob("../plugin/*/README.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(append(files, readme), plugins...)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, file := range files {
		m := readMarkdown(t, file)
		for i, l := range m.lines {
			if !m.prose[i] {
				continue
			}
			for _, match := range link.FindAllStringSubmatch(l, -1) {
				target, fragment, _ := strings.Cut(match[1], "#")
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				resolved := file
				if target != "" {
					resolved = path.Join(path.Dir(file), target)
				}
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s:%d: link %s: %v", file, i+1, match[1], err)
					continue
				}
				if fragment != "" && strings.HasSuffix(resolved, ".md") && !readMarkdown(t, resolved).anchors()[fragment] {
					t.Errorf("%s:%d: link %s: %s has no heading #%s", file, i+1, match[1], resolved, fragment)
				}
			}
		}
	}
}

// docs/install.md describes every step of every profile: each of a
// profile's own steps has a row of its own (| `name` | ...), the table of
// profiles lists them in install's order, and each opt-in step is named.
func TestInstallDocListsEveryStep(t *testing.T) {
	m := readMarkdown(t, installMD)
	text := strings.Join(m.lines, "\n")
	for _, l := range layout.All() {
		plan, err := steps.Plan(l)
		if err != nil {
			t.Fatal(err)
		}
		var own []string
		for _, s := range plan {
			if s.OptIn != "" {
				if !strings.Contains(text, "`"+s.Name+"`") {
					t.Errorf("install.md does not name the opt-in step `%s` (%s)", s.Name, s.OptIn)
				}
				continue
			}
			own = append(own, "`"+s.Name+"`")
			if !strings.Contains(text, "\n| `"+s.Name+"` |") {
				t.Errorf("install.md has no row | `%s` | for the %s step", s.Name, l.Name)
			}
		}
		if row := profileCell(t, m, "install steps", l.Name); row != strings.Join(own, ", ") {
			t.Errorf("install.md's install steps for %s: %q, want %q", l.Name, row, strings.Join(own, ", "))
		}
	}
}

// profileCell is the cell of the table comparing the profiles in row
// (its first cell) and the column whose header starts with profile.
func profileCell(t *testing.T, m markdown, row, profile string) string {
	t.Helper()
	cells := func(l string) []string {
		parts := strings.Split(strings.Trim(l, "|"), "|")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		return parts
	}
	var header []string
	for i, l := range m.lines {
		if !m.prose[i] || !strings.HasPrefix(l, "|") {
			header = nil
			continue
		}
		c := cells(l)
		if header == nil {
			header = c
			continue
		}
		if c[0] != row {
			continue
		}
		for j, h := range header {
			if j > 0 && j < len(c) && strings.HasPrefix(h, profile) {
				return c[j]
			}
		}
	}
	t.Errorf("install.md: no table row %q with a column %q", row, profile)
	return ""
}

// "Who may run it" names every kind of object the yurt-tunnel steps create
// from deploy/ (whose RBAC the installer needs), such as the monitoring
// step's PodMonitors and PrometheusRule.
func TestInstallDocRBACNamesEveryKind(t *testing.T) {
	var who string
	for _, l := range readMarkdown(t, installMD).lines {
		if strings.HasPrefix(l, "**Who may run it") {
			who = l
			continue
		}
		if who != "" {
			if l == "" {
				break
			}
			who += " " + l
		}
	}
	if who == "" {
		t.Fatal(`install.md has no paragraph "Who may run it"`)
	}
	for _, dir := range []string{deploy.Records, deploy.CoreDNSRBAC, deploy.TunnelNodesSync, deploy.Monitoring} {
		objs, err := deploy.Render(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if !regexp.MustCompile(`\b` + o.GetKind() + `s?\b`).MatchString(who) {
				t.Errorf(`install.md's "Who may run it" does not name %s (deploy/%s's %s)`, o.GetKind(), dir, o.GetName())
			}
		}
	}
}
