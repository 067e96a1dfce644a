package corefile

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// directive is one plugin line, with its block if it has one.
type directive struct {
	name     string
	args     []string
	children []*directive
	// block is whether it has a block, even an empty one.
	block bool
	// start is the offset of the first token; end is just past the last
	// token or the closing brace.
	start, end int
	// lineStart is the offset of the line the directive starts on.
	lineStart int
}

// serverBlock is a server block: its keys (".:53") and its directives.
type serverBlock struct {
	keys       []string
	directives []*directive
}

type token struct {
	text       string
	start, end int
	// line is the line the token starts on, endLine the one it ends on (a
	// quoted token may span lines).
	line, endLine int
	// lineStart is the offset where the token's first line begins.
	lineStart int
}

// tokenize splits a Corefile into tokens as CoreDNS's Caddyfile lexer does:
// Unicode whitespace separates; '#' at a token's start comments out the rest
// of the line, inside a word the rest of the word; a double quote at a
// token's start groups up to the next unescaped one, and only \" is an
// escape. Lines are counted the same way, since which line a token is on
// decides where a directive ends. It is stricter in one way: an unclosed
// quote is an error rather than a token running to the end of the file.
func tokenize(src string) ([]token, error) {
	var toks []token
	line, lineStart := 1, 0
	i := 0
	for i < len(src) {
		r, size := utf8.DecodeRuneInString(src[i:])
		switch {
		case r == '\n':
			line++
			i += size
			lineStart = i
			continue
		case unicode.IsSpace(r):
			i += size
			continue
		case r == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			continue
		}
		tok := token{start: i, line: line, lineStart: lineStart}
		var b strings.Builder
		if r == '"' {
			i++
			closed := false
			for i < len(src) {
				c := src[i]
				if c == '"' {
					i++
					closed = true
					break
				}
				if c == '\\' && i+1 < len(src) && src[i+1] == '"' {
					b.WriteByte('"')
					i += 2
					continue
				}
				if c == '\\' && i+1 < len(src) {
					// Any other escape keeps its backslash.
					b.WriteByte(c)
					i++
					c = src[i]
				}
				if c == '\n' {
					line++
					lineStart = i + 1
				}
				b.WriteByte(c)
				i++
			}
			if !closed {
				return nil, fmt.Errorf("line %d: unterminated quote", tok.line)
			}
			tok.end = i
		} else {
			for i < len(src) {
				r, size := utf8.DecodeRuneInString(src[i:])
				if unicode.IsSpace(r) || r == '#' {
					break
				}
				b.WriteString(src[i : i+size])
				i += size
			}
			tok.end = i
			// A '#' inside a word comments out the rest of the word only.
			for i < len(src) {
				r, size := utf8.DecodeRuneInString(src[i:])
				if unicode.IsSpace(r) {
					break
				}
				i += size
			}
		}
		tok.text, tok.endLine = b.String(), line
		toks = append(toks, tok)
	}
	return toks, nil
}

// parseCorefile builds the server blocks of src.
func parseCorefile(src string) ([]*serverBlock, error) {
	toks, err := tokenize(src)
	if err != nil {
		return nil, err
	}
	p := &corefileParser{toks: toks}
	var blocks []*serverBlock
	for p.more() {
		sb := &serverBlock{}
		// Keys run up to the opening brace; commas separate keys too.
		for p.more() && p.peek().text != "{" {
			for _, k := range strings.Split(p.next().text, ",") {
				if k != "" {
					sb.keys = append(sb.keys, k)
				}
			}
		}
		if !p.more() {
			if len(sb.keys) > 0 {
				// A server block without braces: the rest of the file is its body.
				return nil, fmt.Errorf("server block %v has no '{'", sb.keys)
			}
			break
		}
		open := p.next()
		if len(sb.keys) == 0 {
			return nil, fmt.Errorf("line %d: '{' without server block keys", open.line)
		}
		sb.directives, err = p.block(open, true)
		if err != nil {
			return nil, err
		}
		blocks = append(blocks, sb)
	}
	return blocks, nil
}

type corefileParser struct {
	toks []token
	pos  int
}

func (p *corefileParser) more() bool { return p.pos < len(p.toks) }

func (p *corefileParser) peek() token { return p.toks[p.pos] }

func (p *corefileParser) next() token {
	t := p.toks[p.pos]
	p.pos++
	return t
}

// block parses directives up to the '}' matching open. top is whether it is
// a server block, where, as in CoreDNS, a directive's last token and the '}'
// after it (or the next token after its block's '}') must be on different
// lines.
func (p *corefileParser) block(open token, top bool) ([]*directive, error) {
	var ds []*directive
	for {
		if !p.more() {
			return nil, fmt.Errorf("line %d: '{' is never closed", open.line)
		}
		t := p.next()
		if t.text == "}" {
			return ds, nil
		}
		if t.text == "{" {
			return nil, fmt.Errorf("line %d: '{' without a directive", t.line)
		}
		d := &directive{name: t.text, start: t.start, end: t.end, lineStart: t.lineStart}
		last := t
		// Arguments: the rest of the line, up to a '{' or '}'.
		for p.more() && p.peek().line == last.endLine && p.peek().text != "{" && p.peek().text != "}" {
			last = p.next()
			d.args = append(d.args, last.text)
			d.end = last.end
		}
		if p.more() && p.peek().text == "{" {
			children, err := p.block(p.next(), false)
			if err != nil {
				return nil, err
			}
			last = p.toks[p.pos-1]
			d.children, d.block, d.end = children, true, last.end
		}
		if top && p.more() && p.peek().line == last.endLine {
			return nil, fmt.Errorf("line %d: unexpected %q after directive %s", last.endLine, p.peek().text, d.name)
		}
		ds = append(ds, d)
	}
}

// mainBlock is the server block that serves cluster DNS: ".:53", ".", or
// "dns://.:53".
func mainBlock(blocks []*serverBlock) *serverBlock {
	for _, sb := range blocks {
		for _, k := range sb.keys {
			k = strings.TrimPrefix(k, "dns://")
			if k == "." || k == ".:53" {
				return sb
			}
		}
	}
	return nil
}

// TunnelHostsFile is the hosts file OpenYurt's manual setup mounts.
const TunnelHostsFile = "/etc/edge/tunnel-nodes"

// EnsureYurthosts returns src with a yurthosts block, whose lines before
// its fallthrough are options, in the .:53 server block: in place of
// OpenYurt's `hosts /etc/edge/tunnel-nodes` block, else before the
// kubernetes plugin. Every other byte is kept; unchanged when the block
// already has yurthosts.
func EnsureYurthosts(src string, options []string) (out string, changed bool, err error) {
	blocks, err := parseCorefile(src)
	if err != nil {
		return "", false, fmt.Errorf("parsing Corefile: %w", err)
	}
	sb := mainBlock(blocks)
	if sb == nil {
		return "", false, fmt.Errorf("the Corefile has no .:53 server block")
	}
	var hosts, kubernetes *directive
	for _, d := range sb.directives {
		switch {
		case d.name == "yurthosts":
			return src, false, nil
		case d.name == "hosts" && len(d.args) > 0 && d.args[0] == TunnelHostsFile:
			hosts = d
		case d.name == "kubernetes" && kubernetes == nil:
			kubernetes = d
		}
	}
	switch {
	case hosts != nil:
		in := indentOf(src, hosts)
		return src[:hosts.start] + yurthostsBlock(in, options) + src[hosts.end:], true, nil
	case kubernetes != nil:
		in := indentOf(src, kubernetes)
		return src[:kubernetes.start] + yurthostsBlock(in, options) + "\n" + in + src[kubernetes.start:], true, nil
	}
	return "", false, fmt.Errorf("the .:53 server block has no kubernetes plugin to place yurthosts before")
}

// yurthostsBlock is the directive install adds, indented like its neighbours.
func yurthostsBlock(indent string, options []string) string {
	inner := "    "
	if strings.HasPrefix(indent, "\t") {
		inner = "\t"
	}
	var b strings.Builder
	b.WriteString("yurthosts {\n")
	for _, o := range options {
		b.WriteString(indent + inner + o + "\n")
	}
	b.WriteString(indent + inner + "fallthrough\n")
	return b.String() + indent + "}"
}

// SetYurthosts replaces the Corefile's yurthosts block with one of options.
func SetYurthosts(src string, options []string) (string, error) {
	blocks, err := parseCorefile(src)
	if err != nil {
		return "", err
	}
	sb := mainBlock(blocks)
	if sb == nil {
		return "", fmt.Errorf("no .:53 server block")
	}
	for _, d := range sb.directives {
		if d.name == "yurthosts" {
			return src[:d.start] + yurthostsBlock(indentOf(src, d), options) + src[d.end:], nil
		}
	}
	return "", fmt.Errorf("no yurthosts block")
}

// SetKubernetes replaces the kubernetes directive of dst's .:53 block with
// the one of from's .:53 block, byte for byte: a node-local cache then
// answers the cluster's zones with the options the cluster DNS has (its
// domain, pods mode, TTL). dst is returned unchanged when from's block has
// no kubernetes directive.
func SetKubernetes(dst, from string) (string, error) {
	find := func(src string) (*directive, error) {
		blocks, err := parseCorefile(src)
		if err != nil {
			return nil, err
		}
		sb := mainBlock(blocks)
		if sb == nil {
			return nil, fmt.Errorf("no .:53 server block")
		}
		for _, d := range sb.directives {
			if d.name == "kubernetes" {
				return d, nil
			}
		}
		return nil, nil
	}
	target, err := find(dst)
	if err != nil {
		return "", err
	}
	if target == nil {
		return "", fmt.Errorf("no kubernetes directive to replace")
	}
	source, err := find(from)
	if err != nil {
		return "", fmt.Errorf("the cluster's Corefile: %w", err)
	}
	if source == nil {
		return dst, nil
	}
	var keep []string
	for _, o := range target.children {
		if slices.Contains(cacheOnlyOptions, o.name) && !slices.ContainsFunc(source.children, func(c *directive) bool { return c.name == o.name }) {
			keep = append(keep, dst[o.lineStart:o.end])
		}
	}
	return dst[:target.start] + withLines(from, source, keep, indentOf(dst, target)) + dst[target.end:], nil
}

// cacheOnlyOptions are the kubernetes options a node-local cache keeps from
// its own Corefile when it takes the cluster's directive. startup_timeout:
// a cache's surge pod shares the address's sockets with the old pod
// (SO_REUSEPORT), so it is asked before it is Ready, and the kubernetes
// plugin answers SERVFAIL for the cluster's names until it has synced; the
// cache must not start serving before then.
var cacheOnlyOptions = []string{"startup_timeout"}

// withLines is d's text in src with lines added at the end of its block
// (a block is opened when d has none).
func withLines(src string, d *directive, lines []string, indent string) string {
	text := src[d.start:d.end]
	if len(lines) == 0 {
		return text
	}
	add := strings.Join(lines, "\n")
	switch {
	case len(d.children) > 0:
		at := d.children[len(d.children)-1].end - d.start
		return text[:at] + "\n" + add + text[at:]
	case d.block:
		return strings.TrimRight(text[:len(text)-1], " \t\n") + "\n" + add + "\n" + indent + "}"
	}
	return text + " {\n" + add + "\n" + indent + "}"
}

// indentOf is the indentation of the line d starts on (it may share the
// line with a "{").
func indentOf(src string, d *directive) string {
	line := src[d.lineStart:d.start]
	return line[:len(line)-len(strings.TrimLeft(line, " \t"))]
}
