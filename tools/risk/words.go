package risk

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// maxBraceExpansions bounds how many words one shell word may expand to
// through brace expansion ({a,b}) during classification; the rest is
// dropped so that a hostile {1..1000000} cannot blow up the classifier.
const maxBraceExpansions = 64

// maxBraceBytes bounds the total size of one word's brace expansions.
const maxBraceBytes = 64 << 10

// Placeholders stand for run-time expansions in rendered words. They are
// valid shell syntax, so a rendered string handed to "sh -c" or eval can be
// parsed again and the expansion still reads as computed at run time.
const (
	substPlaceholder = "$(__subst)"
	paramPlaceholder = "$__param"
	arithPlaceholder = "$__arith"
	procPlaceholder  = "/dev/fd/63"
)

// arg is one shell word rendered to the string the shell would most likely
// pass to the command, with run-time expansions replaced by placeholders:
// a plain $NAME or ${NAME} renders as "$NAME", anything else as one of the
// placeholders above.
type arg struct {
	s        string
	dyn      bool // some part is expanded at run time (parameter, command substitution, …)
	dynStart bool // the word begins with a run-time expansion, so it may start with '-'
	word     *syntax.Word
}

// renderArgs renders every word of a simple command, expanding brace
// expressions ({rm,-rf,/} becomes three arguments).
func renderArgs(words []*syntax.Word) []arg {
	out := make([]arg, 0, len(words))
	for _, w := range words {
		out = append(out, renderWord(w)...)
	}
	return out
}

// braceParts returns the parts of w with its brace expressions ({a,b},
// {1..3}) split out, leaving w untouched.
func braceParts(w *syntax.Word) []syntax.WordPart {
	if !hasBraceCandidate(w.Parts) {
		return w.Parts
	}
	cp := &syntax.Word{Parts: append([]syntax.WordPart(nil), w.Parts...)}
	if syntax.SplitBraces(cp) {
		return cp.Parts
	}
	return w.Parts
}

// renderWord renders one word, brace-expanded, into one or more args.
func renderWord(w *syntax.Word) []arg {
	if w == nil {
		return nil
	}
	parts := braceParts(w)
	r := renderer{}
	alts := r.parts(parts, []string{""})
	out := make([]arg, 0, len(alts))
	for _, s := range alts {
		out = append(out, arg{s: s, dyn: r.dyn, dynStart: r.dynStart, word: w})
	}
	return out
}

// renderString renders a word that is used as a single string (a heredoc
// body, a here-string, a redirection target): brace expressions are not
// expanded, the first alternative is used.
func renderString(w *syntax.Word) arg {
	if w == nil {
		return arg{}
	}
	r := renderer{}
	alts := r.parts(w.Parts, []string{""})
	return arg{s: alts[0], dyn: r.dyn, dynStart: r.dynStart, word: w}
}

func hasBraceCandidate(parts []syntax.WordPart) bool {
	for _, p := range parts {
		if l, ok := p.(*syntax.Lit); ok && strings.Contains(l.Value, "{") {
			return true
		}
	}
	return false
}

type renderer struct {
	dyn, dynStart bool
	n             int        // parts rendered so far, to compute dynStart
	mode          renderMode // how run-time expansions are rendered
}

// renderMode says how a renderer renders run-time expansions.
type renderMode uint8

const (
	renderPlaceholders renderMode = iota // $NAME or a placeholder (see arg)
	renderEmpty                          // as if they expanded to nothing
	renderDefaults                       // ${x:-word} and friends as their word, the rest as nothing
	renderInner                          // $NAME for simple parameters, nothing for the rest
)

// nonEmptyPlaceholder stands, in the renderEmpty and renderDefaults modes,
// for an expansion that cannot be empty (${x:?}, $((…)), ${#x}).
const nonEmptyPlaceholder = "__dyn__"

// parts appends the rendering of parts to every prefix in acc.
func (r *renderer) parts(parts []syntax.WordPart, acc []string) []string {
	for _, p := range parts {
		first := r.n == 0
		r.n++
		switch p := p.(type) {
		case *syntax.Lit:
			acc = appendAll(acc, unescapeUnquoted(p.Value))
		case *syntax.SglQuoted:
			v := p.Value
			if p.Dollar {
				v = decodeANSIC(v)
			}
			acc = appendAll(acc, v)
		case *syntax.DblQuoted:
			var b strings.Builder
			for i, q := range p.Parts {
				switch q := q.(type) {
				case *syntax.Lit:
					b.WriteString(unescapeDouble(q.Value))
				default:
					if first && i == 0 {
						r.dynStart = true
					}
					r.dyn = true
					b.WriteString(r.dynamicText(q))
				}
			}
			acc = appendAll(acc, b.String())
		case *syntax.BraceExp:
			acc = r.brace(p, acc)
		default:
			r.dyn = true
			if first {
				r.dynStart = true
			}
			acc = appendAll(acc, r.dynamicText(p))
		}
	}
	return acc
}

// brace expands a brace expression: a list {a,b} yields each element, a
// sequence {x..y} yields its two end points (enough for classification).
func (r *renderer) brace(b *syntax.BraceExp, acc []string) []string {
	elems := b.Elems
	if b.Sequence && len(elems) > 2 {
		elems = elems[:2]
	}
	var out []string
	size := 0
	for _, e := range elems {
		sub := renderer{n: r.n - 1, mode: r.mode}
		got := sub.parts(e.Parts, append([]string(nil), acc...))
		r.dyn = r.dyn || sub.dyn
		r.dynStart = r.dynStart || sub.dynStart
		for _, g := range got {
			if len(out) >= maxBraceExpansions || size+len(g) > maxBraceBytes && len(out) > 0 {
				return out
			}
			size += len(g)
			out = append(out, g)
		}
	}
	if len(out) == 0 {
		return acc
	}
	return out
}

func appendAll(acc []string, s string) []string {
	for i := range acc {
		acc[i] += s
	}
	return acc
}

// dynamicText renders a run-time expansion in the renderer's mode.
func (r *renderer) dynamicText(p syntax.WordPart) string {
	if r.mode == renderPlaceholders {
		return dynamicText(p)
	}
	switch p := p.(type) {
	case *syntax.ParamExp:
		if r.mode == renderInner && p.Param != nil && simpleParam(p) {
			return "$" + p.Param.Value
		}
		if p.Param != nil && p.Param.Value == "PWD" && simpleParam(p) {
			return "." // the shell keeps $PWD set
		}
		if p.Length || p.Width {
			return nonEmptyPlaceholder
		}
		if p.Exp != nil {
			switch p.Exp.Op {
			case syntax.ErrorUnsetOrNull:
				return nonEmptyPlaceholder
			case syntax.DefaultUnset, syntax.DefaultUnsetOrNull, syntax.AssignUnset, syntax.AssignUnsetOrNull,
				syntax.AlternateUnset, syntax.AlternateUnsetOrNull:
				if r.mode == renderDefaults && p.Exp.Word != nil {
					inner := renderer{mode: renderInner}
					return inner.parts(p.Exp.Word.Parts, []string{""})[0]
				}
			}
		}
		return ""
	case *syntax.ArithmExp:
		return nonEmptyPlaceholder
	case *syntax.ProcSubst:
		return procPlaceholder
	case *syntax.CmdSubst:
		if len(p.Stmts) == 1 {
			if call, ok := p.Stmts[0].Cmd.(*syntax.CallExpr); ok && len(call.Args) == 1 && call.Args[0].Lit() == "pwd" {
				return "." // $(pwd)
			}
			if src, ok := stageInfo(p.Stmts[0]).echoSrc(); ok {
				return strings.TrimRight(src, "\n") // $(echo /)
			}
		}
	}
	return ""
}

// minimalRenderings renders a word that has run-time expansions the ways
// it may come out when they expand to nothing: once with every expansion
// empty, once with ${x:-word}, ${x:=word} and ${x:+word} as their word.
// Brace expressions are expanded. Expansions that cannot be empty (${x:?},
// $((…))) render as a non-empty placeholder.
func minimalRenderings(w *syntax.Word) []string {
	if w == nil {
		return nil
	}
	parts := braceParts(w)
	empty := renderer{mode: renderEmpty}
	out := empty.parts(parts, []string{""})
	defaults := renderer{mode: renderDefaults}
	return append(out, defaults.parts(parts, []string{""})...)
}

// quoted reports whether some part of w is quoted.
func quoted(w *syntax.Word) bool {
	if w == nil {
		return false
	}
	for _, p := range w.Parts {
		switch p.(type) {
		case *syntax.SglQuoted, *syntax.DblQuoted:
			return true
		}
	}
	return false
}

// dynamicText renders a run-time expansion as "$NAME" or a placeholder.
func dynamicText(p syntax.WordPart) string {
	switch p := p.(type) {
	case *syntax.ParamExp:
		if p.Param != nil && simpleParam(p) {
			return "$" + p.Param.Value
		}
		return paramPlaceholder
	case *syntax.CmdSubst:
		return substPlaceholder
	case *syntax.ArithmExp:
		return arithPlaceholder
	case *syntax.ProcSubst:
		return procPlaceholder
	default:
		return paramPlaceholder
	}
}

func simpleParam(p *syntax.ParamExp) bool {
	return p.Flags == nil && !p.Excl && !p.Length && !p.Width && !p.IsSet &&
		p.NestedParam == nil && p.Index == nil && len(p.Modifiers) == 0 &&
		p.Slice == nil && p.Repl == nil && p.Names == 0 && p.Exp == nil
}

// unescapeUnquoted removes shell backslash escapes outside quotes: \x is x.
func unescapeUnquoted(s string) string { return unescape(s, "") }

// unescapeDouble removes the backslash escapes valid inside double quotes.
func unescapeDouble(s string) string { return unescape(s, "$`\"\\") }

// unescape removes backslash escapes: a backslash before a newline goes
// with it, one before a character of escapable (any character when
// escapable is "") goes alone, others stay.
func unescape(s, escapable string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch {
			case s[i+1] == '\n':
				i++
				continue
			case escapable == "" || strings.IndexByte(escapable, s[i+1]) >= 0:
				i++
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// decodeANSIC decodes the body of a bash $'…' string.
func decodeANSIC(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; e {
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'e', 'E':
			b.WriteByte(0x1b)
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case 'c':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i] & 0x1f)
			}
		case 'x', 'u', 'U':
			max := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			j := i + 1
			for j < len(s) && j-i-1 < max && isHex(s[j]) {
				j++
			}
			if j == i+1 {
				b.WriteByte('\\')
				b.WriteByte(e)
				continue
			}
			v, _ := strconv.ParseUint(s[i+1:j], 16, 32)
			if e == 'x' {
				b.WriteByte(byte(v))
			} else if r := rune(v); utf8.ValidRune(r) {
				b.WriteRune(r)
			}
			i = j - 1
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(s) && j-i < 3 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			v, _ := strconv.ParseUint(s[i:j], 8, 16)
			b.WriteByte(byte(v))
			i = j - 1
		default: // \\ \' \" \? and unknown escapes
			if e != '\\' && e != '\'' && e != '"' && e != '?' {
				b.WriteByte('\\')
			}
			b.WriteByte(e)
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// decodeEcho decodes the escapes that echo -e and printf formats interpret.
func decodeEcho(s string) string {
	return decodeANSIC(s)
}

// joinArgs joins rendered args with spaces, as eval and "sh -c a b" do.
func joinArgs(args []arg) string {
	ss := make([]string, len(args))
	for i, a := range args {
		ss[i] = a.s
	}
	return strings.Join(ss, " ")
}
