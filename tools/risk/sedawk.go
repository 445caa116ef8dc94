package risk

import (
	"fmt"
	"strings"
)

// awk classifies an awk program: system(), pipes (print | "cmd",
// "cmd" | getline) and extension loading run commands. A program computed
// at run time cannot be analysed.
func (c *classifier) awk(name string, args []arg) {
	var progs []arg
	haveProg, sandbox := false, false
	inline := func(why string) {
		c.add(RiskDangerous, KeyInlineCode, fmt.Sprintf("runs inline interpreter code that cannot be analysed (%s %s)", name, why))
	}
	progFile := func(f arg) {
		haveProg = true
		if fromStream(f) {
			inline("program read from a stream " + f.s)
			return
		}
		c.noteRan(f.s)
	}
	i := 0
loop:
	for ; i < len(args); i++ {
		a := args[i]
		s := a.s
		switch {
		case a.dynStart:
			inline("arguments computed at run time")
			return
		case s == "--":
			i++
			break loop
		case len(s) < 2 || s[0] != '-':
			break loop
		case strings.HasPrefix(s, "--"):
			_, val, hasVal := strings.Cut(s[2:], "=") // for options that only take an inline value
			o, value := longOpt(args, &i)
			switch {
			case longMatch(o, "sandbox", 2):
				sandbox = true
			case longMatch(o, "source", 2):
				progs = append(progs, value())
				haveProg = true
			case longMatch(o, "file", 2), longMatch(o, "exec", 2), longMatch(o, "include", 2):
				progFile(value())
			case longMatch(o, "load", 2):
				c.add(RiskDangerous, KeyExecOption, fmt.Sprintf("loads an extension that cannot be analysed (%s --load)", name))
				value()
			case longMatch(o, "field-separator", 2), longMatch(o, "assign", 2):
				value()
			case hasVal && (longMatch(o, "dump-variables", 2) || longMatch(o, "profile", 2) || longMatch(o, "pretty-print", 2)):
				c.writeTarget(arg{s: val}, name)
			}
		default:
			for j := 1; j < len(s); j++ {
				ch := s[j]
				if ch == 'S' {
					sandbox = true
				}
				if ch == 'd' || ch == 'o' || ch == 'p' {
					if v := s[j+1:]; v != "" {
						c.writeTarget(arg{s: v}, name) // gawk -o[file], -p[file], -d[file]
					}
					break
				}
				if strings.IndexByte("FvfeEilW", ch) < 0 {
					continue
				}
				v := clusterValue(args, &i, j)
				switch ch {
				case 'f', 'E', 'i':
					progFile(v)
				case 'e':
					progs = append(progs, v)
					haveProg = true
				case 'l':
					c.add(RiskDangerous, KeyExecOption, fmt.Sprintf("loads an extension that cannot be analysed (%s -l)", name))
				case 'W':
					if strings.HasPrefix(v.s, "exec") || strings.HasPrefix(v.s, "e=") {
						haveProg = true
					}
					if strings.HasPrefix(v.s, "san") {
						sandbox = true
					}
				}
				break
			}
		}
	}
	if !haveProg && i < len(args) {
		progs = append(progs, args[i])
	}
	for _, p := range progs {
		switch {
		case p.dyn:
			inline("program computed at run time")
		case sandbox:
		default:
			if why := awkRunsCommands(p.s); why != "" {
				inline(why)
			}
		}
	}
}

// awkRunsCommands reports, as a reason, whether an awk program may run a
// command: system(), a pipe to or from a command (print | "cmd", "cmd" |
// getline, |&) or @load. Strings, comments and regular expressions are
// skipped; a "/" is taken as the start of a regular expression only where
// awk could not read it as a division, so that code is never skipped.
func awkRunsCommands(p string) string {
	prev := byte('\n') // last significant character outside strings and regexps
	for i := 0; i < len(p); i++ {
		ch := p[i]
		switch {
		case ch == '"':
			for i++; i < len(p) && p[i] != '"'; i++ {
				if p[i] == '\\' {
					i++
				}
			}
			prev = '"'
		case ch == '#':
			for i < len(p) && p[i] != '\n' {
				i++
			}
			prev = '\n'
		case ch == '/' && strings.IndexByte("\n(,{}!~&=?:;", prev) >= 0:
			for i++; i < len(p) && p[i] != '/' && p[i] != '\n'; i++ {
				if p[i] == '\\' {
					i++
				}
			}
			prev = '/'
		case ch == '|':
			if i+1 < len(p) && p[i+1] == '|' {
				i++
				prev = '|'
				continue
			}
			return "program pipes to or from a command (|)"
		case ch == '@':
			return "program loads an extension (@load)"
		case ch == '_' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z':
			j := i
			for j < len(p) && (p[j] == '_' || p[j] >= 'a' && p[j] <= 'z' || p[j] >= 'A' && p[j] <= 'Z' || p[j] >= '0' && p[j] <= '9') {
				j++
			}
			if p[i:j] == "system" {
				return "program calls system()"
			}
			i, prev = j-1, 'a'
		case ch == ' ' || ch == '\t' || ch == '\r':
		case ch == '\\' && i+1 < len(p) && p[i+1] == '\n':
			i++
		default:
			prev = ch
		}
	}
	return ""
}

// sed classifies a sed command: the GNU e command and s///e flag run
// commands, w writes files, and an in-place edit that deletes every line
// or edits files outside the working directory is dangerous. In-place
// edits of files below the working directory are everyday work and stay
// safe.
func (c *classifier) sed(args []arg) {
	var scripts, files []arg
	inPlace, sandbox, haveScript, end := false, false, false, false
	for i := 0; i < len(args); i++ {
		a := args[i]
		s := a.s
		if end || len(s) < 2 || s[0] != '-' || a.dynStart {
			files = append(files, a)
			continue
		}
		if s == "--" {
			end = true
			continue
		}
		if strings.HasPrefix(s, "--") {
			o, value := longOpt(args, &i)
			switch {
			case longMatch(o, "expression", 1):
				scripts = append(scripts, value())
				haveScript = true
			case longMatch(o, "file", 2):
				c.sedFile(value())
				haveScript = true
			case longMatch(o, "in-place", 1):
				inPlace = true
			case longMatch(o, "sandbox", 2):
				sandbox = true
			case longMatch(o, "line-length", 1):
				value()
			}
			continue
		}
		for j := 1; j < len(s); j++ {
			ch := s[j]
			if ch == 'i' || ch == 'I' {
				inPlace = true // GNU: the rest of the cluster is a backup suffix
				break
			}
			if ch != 'e' && ch != 'f' && ch != 'l' {
				continue
			}
			v := clusterValue(args, &i, j)
			switch ch {
			case 'e':
				scripts = append(scripts, v)
				haveScript = true
			case 'f':
				c.sedFile(v)
				haveScript = true
			}
			break
		}
	}
	if !haveScript && len(files) > 0 {
		scripts = append(scripts, files[0])
		files = files[1:]
		// BSD sed -i '' SCRIPT FILE: the empty word is the backup suffix.
		if inPlace && scripts[0].s == "" && !scripts[0].dyn && len(files) > 0 {
			scripts = append(scripts, files[0])
		}
	}
	deletesAll, erasesAll := false, false
	for _, sc := range scripts {
		if sc.dyn && !sandbox {
			c.add(RiskDangerous, KeyExecOption, fmt.Sprintf("sed script computed at run time may run commands (sed %s)", sc.s))
		}
		info := sedScan(sc.s)
		switch {
		case sandbox:
		case !info.ok:
			c.add(RiskDangerous, KeyExecOption, fmt.Sprintf("sed script that cannot be analysed may run commands (sed %s)", sc.s))
		case info.execSpace:
			c.add(RiskDangerous, KeyExecOption, "sed runs the text it edits as a command (e / s///e)")
		}
		if !sandbox {
			for _, cmd := range info.exec {
				c.execOption(cmd, "sed e "+cmd, nil)
			}
		}
		for _, w := range info.writes {
			c.writeTarget(arg{s: w}, "sed w")
		}
		deletesAll = deletesAll || info.deletesAll
		erasesAll = erasesAll || info.erasesAll
	}
	if !inPlace {
		return
	}
	if deletesAll {
		c.add(RiskDangerous, KeySedInPlace, "empties files in place (sed -i d)")
	}
	if erasesAll {
		c.add(RiskDangerous, KeySedInPlace, fmt.Sprintf("erases every line of the files it edits in place (sed -i %s)", joinArgs(scripts)))
	}
	for _, f := range files {
		c.writeTarget(f, "sed -i")
		if c.outsideCwd(f.s) {
			c.add(RiskDangerous, KeySedInPlace, fmt.Sprintf("edits files outside the working directory in place (sed -i … %s)", f.s))
		}
	}
}

// sedFile notes a sed script file; one read from a stream cannot be analysed.
func (c *classifier) sedFile(f arg) {
	if fromStream(f) || f.s == "" {
		c.add(RiskDangerous, KeyExecOption, fmt.Sprintf("sed script read from a stream may run commands (sed -f %s)", f.s))
		return
	}
	c.noteRan(f.s)
}

// sedInfo is what sedScan finds in a sed script.
type sedInfo struct {
	ok         bool     // the script was understood
	exec       []string // commands given to e
	execSpace  bool     // e without a command, or s///e: runs the pattern space
	writes     []string // files named by w, W and s///w
	deletesAll bool     // d, D, c or z applies to every line
	erasesAll  bool     // s replaces every whole line with text of its own (s/.*//)
}

// wholeLine reports whether a sed regular expression matches every line
// whole: .*, ^.*, .*$, ^.*$.
func wholeLine(re string) bool {
	re = strings.TrimSuffix(strings.TrimPrefix(re, "^"), "$")
	return re == ".*" || re == `\(.*\)`
}

// sedScan parses a GNU sed script far enough to find e, s///e and w.
func sedScan(s string) (r sedInfo) {
	i, n := 0, len(s)
	var blocks []bool // whether each open block is conditional
	conditional := 0  // how many of them are

	skipSpace := func() {
		for i < n && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
	}
	toEOL := func() string {
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			v := s[i:]
			i = n
			return v
		}
		v := s[i : i+j]
		i += j + 1
		return v
	}
	toSemi := func() {
		for i < n && s[i] != ';' && s[i] != '\n' && s[i] != '}' {
			i++
		}
	}
	// delimited skips text up to an unescaped delimiter d; in a regular
	// expression (re), a bracket expression may hold d, as GNU sed allows.
	delimited := func(d byte, re bool) bool {
		for i < n {
			switch s[i] {
			case '\\':
				i += 2
				continue
			case '[':
				if re && d != '[' {
					j := i + 1
					if j < n && s[j] == '^' {
						j++
					}
					if j < n && s[j] == ']' {
						j++
					}
					for j < n && s[j] != ']' && s[j] != '\n' {
						if s[j] == '[' && j+1 < n && (s[j+1] == ':' || s[j+1] == '=' || s[j+1] == '.') {
							if k := strings.Index(s[j+2:], string(s[j+1])+"]"); k >= 0 {
								j += k + 4
								continue
							}
						}
						j++
					}
					if j >= n || s[j] != ']' {
						return false
					}
					i = j + 1
					continue
				}
			case d:
				i++
				return true
			case '\n':
				if d != '\n' {
					return false
				}
			}
			i++
		}
		return false
	}
	address := func() (string, bool) {
		start := i
		regex := false
		switch {
		case i < n && s[i] >= '0' && s[i] <= '9':
			for i < n && (s[i] >= '0' && s[i] <= '9' || s[i] == '~') {
				i++
			}
		case i < n && s[i] == '$':
			i++
		case i < n && s[i] == '/':
			i++
			if !delimited('/', true) {
				return "", false
			}
			regex = true
		case i+1 < n && s[i] == '\\':
			d := s[i+1]
			i += 2
			if !delimited(d, true) {
				return "", false
			}
			regex = true
		}
		for regex && i < n && (s[i] == 'I' || s[i] == 'M') {
			i++
		}
		return s[start:i], true
	}
	for {
		for i < n && strings.IndexByte(" \t\r\n;", s[i]) >= 0 {
			i++
		}
		if i >= n {
			break
		}
		if s[i] == '#' {
			toEOL()
			continue
		}
		a1, ok := address()
		if !ok {
			return r
		}
		a2 := ""
		skipSpace()
		if a1 != "" && i < n && s[i] == ',' {
			i++
			skipSpace()
			if i < n && (s[i] == '+' || s[i] == '~') {
				a2 = "+"
				for i++; i < n && s[i] >= '0' && s[i] <= '9'; i++ {
				}
			} else if a2, ok = address(); !ok || a2 == "" {
				return r
			}
		}
		skipSpace()
		negated := false
		for i < n && s[i] == '!' {
			negated = true
			i++
			skipSpace()
		}
		if i >= n {
			return r
		}
		everyLine := !negated && conditional == 0 && (a1 == "" || (a1 == "1" || a1 == "0") && a2 == "$")
		cmd := s[i]
		i++
		switch cmd {
		case '{':
			cond := a1 != "" || negated
			blocks = append(blocks, cond)
			if cond {
				conditional++
			}
			continue
		case '}':
			if len(blocks) == 0 {
				return r
			}
			if blocks[len(blocks)-1] {
				conditional--
			}
			blocks = blocks[:len(blocks)-1]
		case 'd', 'D', 'z':
			r.deletesAll = r.deletesAll || everyLine
		case '=', 'g', 'G', 'h', 'H', 'n', 'N', 'p', 'P', 'x', 'F':
		case 'l', 'L', 'q', 'Q':
			skipSpace()
			for i < n && s[i] >= '0' && s[i] <= '9' {
				i++
			}
		case ':', 'b', 't', 'T', 'v':
			skipSpace()
			toSemi()
		case 'a', 'i', 'c':
			r.deletesAll = r.deletesAll || cmd == 'c' && everyLine
			skipSpace()
			if i < n && s[i] == '\\' {
				i++
				if i < n && s[i] == '\n' {
					i++
				}
			}
			for {
				line := toEOL()
				if !strings.HasSuffix(line, "\\") || i >= n {
					break
				}
			}
			continue
		case 'r', 'R':
			skipSpace()
			toEOL()
			continue
		case 'w', 'W':
			skipSpace()
			r.writes = append(r.writes, toEOL())
			continue
		case 'e':
			skipSpace()
			if c := toEOL(); strings.TrimSpace(c) == "" {
				r.execSpace = true
			} else {
				r.exec = append(r.exec, c)
			}
			continue
		case 's', 'y':
			if i >= n || s[i] == '\n' || s[i] == '\\' {
				return r
			}
			d := s[i]
			i++
			pat := i
			if !delimited(d, cmd == 's') {
				return r
			}
			repl := i
			pattern := s[pat : i-1]
			if !delimited(d, false) {
				return r
			}
			if cmd == 'y' {
				break
			}
			if everyLine && wholeLine(pattern) && !strings.ContainsAny(s[repl:i-1], "&\\") {
				r.erasesAll = true
			}
		flags:
			for i < n {
				switch f := s[i]; {
				case f == 'g' || f == 'p' || f == 'i' || f == 'I' || f == 'm' || f == 'M' || f >= '0' && f <= '9':
					i++
				case f == 'e':
					r.execSpace = true
					i++
				case f == 'w':
					i++
					skipSpace()
					r.writes = append(r.writes, toEOL())
					break flags
				default:
					break flags
				}
			}
		default:
			return r
		}
		skipSpace()
		if i < n && strings.IndexByte(";\n}#\r", s[i]) < 0 {
			return r
		}
	}
	r.ok = len(blocks) == 0
	return r
}

func init() {
	register(func(c *classifier, _ string, args []arg, _ cmdCtx) { c.sed(args) }, "sed", "gsed")
	register(func(c *classifier, name string, args []arg, _ cmdCtx) { c.awk(name, args) }, keys(awkNames)...)
}
