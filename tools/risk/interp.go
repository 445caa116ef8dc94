package risk

import (
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// interpSpec describes how an interpreter is given its program: inline
// in an option (python -c), in a file (the first operand), or on
// standard input.
type interpSpec struct {
	inline   string   // short options whose value is program text (python -c, perl -e)
	value    string   // short options that take a value, attached or next (python -W)
	attached string   // short options that take the rest of their cluster as value, never the next word (ruby -i)
	file     string   // short options whose value is the program file (php -f)
	stop     string   // short options after which the program is not read at all (python -m)
	long     []string // long options whose value is program text (node --eval)
	longVal  []string // long options that take a separate value when given without '='
	sub      []string // subcommands that take program text (deno eval)
	skip     []string // subcommands that precede the program file (deno run)
	perl     bool     // perl's option clusters (-lne, -0777, -CSD, -Mmodule)
	scanAll  bool     // options are not well known: look for inline options in every argument
}

// interpreters lists the interpreters whose inline programs are found; the
// shells are handled apart.
var interpreters = map[string]interpSpec{
	"python":    {inline: "c", value: "WXQ", stop: "m"},
	"ipython":   {inline: "c", scanAll: true},
	"perl":      {inline: "eE", perl: true},
	"ruby":      {inline: "e", value: "CIrE", attached: "ixFKW0T"},
	"node":      {inline: "ep", value: "rC", long: []string{"eval", "print"}, longVal: []string{"require", "import", "loader", "experimental-loader", "input-type", "title", "conditions", "env-file", "inspect-port", "redirect-warnings", "diagnostic-dir", "report-dir"}},
	"bun":       {inline: "ep", value: "rc", long: []string{"eval", "print"}, longVal: []string{"preload", "cwd", "config", "env-file", "tsconfig-override"}},
	"deno":      {long: []string{"eval", "eval-file"}, sub: []string{"eval"}, skip: []string{"run", "test", "bench", "serve", "repl", "compile", "install"}, value: "c", longVal: []string{"config", "import-map", "env-file", "location", "cert", "seed"}},
	"php":       {inline: "rBRE", value: "cdtSz", file: "fF"},
	"lua":       {inline: "e", value: "l"},
	"luajit":    {inline: "e", value: "lj"},
	"osascript": {inline: "e", value: "ls"},
	"Rscript":   {inline: "e", longVal: []string{"default-packages"}},
	"R":         {inline: "e", file: "f"},
	"julia":     {inline: "eE", value: "JLpt", long: []string{"eval", "print"}, longVal: []string{"project", "load", "sysimage", "threads", "procs", "machine-file"}},
	"expect":    {inline: "c", file: "fb", value: "D"},
	"racket":    {inline: "e", scanAll: true},
	"elixir":    {inline: "e", long: []string{"eval"}, scanAll: true},
	"groovy":    {inline: "e", scanAll: true},
	"guile":     {inline: "c", scanAll: true},
	"tclsh":     {},
	"wish":      {},
}

// interpreterKind maps python3.12, nodejs and friends to a key of
// interpreters; "shell" for shells, "" for anything else.
func interpreterKind(name string) string {
	if shells[name] {
		return "shell"
	}
	if _, ok := interpreters[name]; ok {
		return name
	}
	switch name {
	case "nodejs":
		return "node"
	case "Rscript", "R":
		return name
	}
	base := strings.TrimRight(name, "0123456789.")
	switch base {
	case "python", "pypy", "pythonw":
		return "python"
	case "ipython":
		return "ipython"
	case "perl", "ruby", "php", "lua", "node", "tclsh", "wish":
		return base
	}
	return ""
}

// program is how an interpreter run with some arguments gets its program.
type program struct {
	inline  string // the option or reason that makes it inline ("-c"), "" if none
	stdin   bool   // read from standard input
	script  *arg   // the program file, if any
	stopped bool   // no program is read (python -m module)
	module  string // the module run with -m
}

// interpProgram reads an interpreter's arguments (see program).
func interpProgram(sp interpSpec, args []arg) (p program) {
	skipped := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		s := a.s
		if a.dynStart {
			if !quoted(a.word) {
				p.inline = "arguments computed at run time" // may split into -c CODE
				return p
			}
			p.script = &args[i]
			return p
		}
		switch {
		case s == "--":
			if i+1 < len(args) && args[i+1].s != "-" {
				p.script = &args[i+1]
			} else {
				p.stdin = true
			}
			return p
		case s == "-":
			p.stdin = true
			return p
		case strings.HasPrefix(s, "--"):
			name, _, hasVal := strings.Cut(s[2:], "=")
			if containsString(sp.long, name) {
				p.inline = "--" + name
				return p
			}
			if !hasVal && containsString(sp.longVal, name) && i+1 < len(args) && !optionLike(args[i+1].s) {
				i++
			}
			continue
		case len(s) > 1 && s[0] == '-':
			if sp.perl {
				inline, next := perlCluster(s)
				if inline != "" {
					p.inline = inline
					return p
				}
				if next && i+1 < len(args) && !optionLike(args[i+1].s) {
					i++
				}
				continue
			}
			for j := 1; j < len(s); j++ {
				ch := s[j]
				switch {
				case strings.IndexByte(sp.inline, ch) >= 0:
					p.inline = "-" + string(ch)
					return p
				case strings.IndexByte(sp.stop, ch) >= 0:
					p.stopped = true
					mod := s[j+1:]
					if mod == "" && i+1 < len(args) {
						mod = args[i+1].s
					}
					if codeModules[mod] {
						p.inline = "-m " + mod // python -m timeit 'statement'
					}
					p.module = mod
					return p
				case strings.IndexByte(sp.file, ch) >= 0:
					if v := s[j+1:]; v != "" {
						p.script = &arg{s: v, dyn: a.dyn, word: a.word}
					} else if i+1 < len(args) {
						p.script = &args[i+1]
					}
					return p
				case strings.IndexByte(sp.value, ch) >= 0:
					if j == len(s)-1 && i+1 < len(args) && !optionLike(args[i+1].s) {
						i++
					}
					j = len(s)
				case strings.IndexByte(sp.attached, ch) >= 0:
					j = len(s)
				}
			}
			continue
		}
		if containsString(sp.sub, s) && !skipped {
			p.inline = s
			return p
		}
		if containsString(sp.skip, s) && !skipped {
			skipped = true
			continue
		}
		if sp.scanAll {
			continue
		}
		p.script = &args[i]
		return p
	}
	p.stdin = !sp.scanAll
	return p
}

// codeModules are Python modules that run code given in their arguments.
var codeModules = set("timeit", "pdb", "code", "cProfile", "profile", "trace")

// optionLike reports whether a word looks like an option, which a value
// option does not swallow (so that "-W -c code" still shows the -c).
func optionLike(s string) bool { return len(s) > 1 && s[0] == '-' }

// perlCluster reads one perl option cluster: whether it gives the program
// inline (-e, -E, or -M/-m with code), and whether it takes the next word
// as a value (-I dir).
func perlCluster(s string) (inline string, next bool) {
	for j := 1; j < len(s); j++ {
		ch := s[j]
		switch {
		case ch == 'e' || ch == 'E':
			return "-" + string(ch), false
		case ch == 'M' || ch == 'm':
			// -MModule=args becomes "use Module split(/,/, q{args});": any
			// other character may smuggle code in.
			if strings.Trim(s[j+1:], "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_:=,.-") != "" {
				return "-" + string(ch) + " with code", false
			}
			return "", false
		case ch == 'I':
			return "", j == len(s)-1
		case strings.IndexByte("ixFdD", ch) >= 0:
			return "", false // the rest is its value
		case ch == 'l' || ch == '0':
			for j+1 < len(s) && (isHex(s[j+1]) || s[j+1] == 'x') {
				j++
			}
		case ch == 'C':
			for j+1 < len(s) && strings.IndexByte("0123456789IOEioSDALa", s[j+1]) >= 0 {
				j++
			}
		}
	}
	return "", false
}

// progOf says how interpreter name (a key of interpreters or a shell) run
// with args gets its program.
func progOf(name string, args []arg) program {
	kind := interpreterKind(name)
	switch kind {
	case "":
		return program{stopped: true}
	case "shell":
		cmode, stdin, ops := shellInvocation(args)
		p := program{stdin: !cmode && stdin}
		if cmode {
			p.inline = "-c"
		} else if len(ops) > 0 && !stdin {
			p.script = &ops[0]
		}
		return p
	}
	return interpProgram(interpreters[kind], args)
}

// readsProgramFromStdin reports whether interpreter name, run with args,
// takes its program from standard input (as in curl … | sh).
func readsProgramFromStdin(name string, args []arg) bool {
	return progOf(name, args).stdin
}

// fromStream reports whether a program file operand is really a stream:
// standard input or a process substitution (python3 <(…), bash /dev/stdin).
func fromStream(a arg) bool {
	switch a.s {
	case "-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0":
		return true
	}
	return strings.HasPrefix(a.s, "/dev/fd/") || strings.HasPrefix(a.s, "/proc/self/fd/")
}

// interpreter classifies the program an interpreter runs: inline code
// cannot be analysed; a program file is remembered (a script written by
// the same command line is dangerous); a program fed on standard input
// is inline code, or for a shell, parsed.
func (c *classifier) interpreter(name string, args []arg, cx cmdCtx) {
	kind := interpreterKind(name)
	p := progOf(name, args)
	if r, ok := pythonModuleRunners[p.module]; ok {
		c.noteRunner(r)
	}
	inline := func(why string) {
		c.add(RiskDangerous, KeyInlineCode, fmt.Sprintf("runs inline interpreter code that cannot be analysed (%s %s)", name, why))
	}
	if kind == "node" || kind == "bun" || kind == "deno" {
		for _, a := range args {
			// node --import 'data:text/javascript,…', deno run data:…
			if _, v, _ := strings.Cut(a.s, "="); strings.HasPrefix(a.s, "data:") || strings.HasPrefix(v, "data:") {
				inline("data: URL")
			}
		}
	}
	switch {
	case kind == "shell" && p.inline != "":
		// sh -c is parsed by the shell rule.
	case p.inline != "":
		inline(p.inline)
	case p.script != nil && fromStream(*p.script):
		if kind != "shell" {
			inline("program read from a stream " + p.script.s)
		} else if p.script.word == nil || !c.procSubstSource(p.script.word) {
			c.add(RiskDangerous, KeyPipeToShell, fmt.Sprintf("runs generated commands in a shell (%s %s)", name, p.script.s))
		}
	case p.script != nil:
		if strings.HasPrefix(p.script.s, "http://") || strings.HasPrefix(p.script.s, "https://") {
			c.add(RiskDangerous, KeyCurlPipeShell, fmt.Sprintf("runs a downloaded script (%s %s)", name, p.script.s))
		}
		if kind == "shell" {
			c.noteShellRan(p.script.s, false)
		} else {
			c.noteRan(p.script.s)
		}
	case p.stdin && kind != "shell":
		switch {
		case cx.stdin != nil:
			inline("program from a here-document")
		case cx.stdinFile != nil:
			c.noteRan(cx.stdinFile.s)
		}
	case p.stdin && cx.stdinFile != nil:
		c.noteShellRan(cx.stdinFile.s, false)
	}
}

// procSubstSource handles a shell script given as a process substitution
// (bash <(echo …)): a lone static echo or printf is parsed as commands;
// anything else runs generated commands. It reports whether w was one.
func (c *classifier) procSubstSource(w *syntax.Word) bool {
	if len(w.Parts) != 1 {
		return false
	}
	ps, ok := w.Parts[0].(*syntax.ProcSubst)
	if !ok || ps.Op != syntax.CmdIn {
		return false
	}
	if len(ps.Stmts) == 1 {
		if src, ok := stageInfo(ps.Stmts[0]).echoSrc(); ok {
			c.nested(src)
			return true
		}
	}
	c.add(RiskDangerous, KeyPipeToShell, "runs generated commands in a shell (… <(…))")
	return true
}

// shellInvocation reads a shell's arguments: whether -c gives a command
// string, that string, whether it reads commands from stdin (-s or no
// script operand), and its operands.
func shellInvocation(args []arg) (cmode bool, stdin bool, operands []arg) {
	i := 0
	for i < len(args) {
		s := args[i].s
		if args[i].dynStart {
			break
		}
		if s == "--" || s == "-" {
			i++
			if s == "-" {
				stdin = true
			}
			break
		}
		if strings.HasPrefix(s, "--") {
			if s == "--rcfile" || s == "--init-file" {
				i++
			}
			i++
			continue
		}
		if len(s) < 2 || s[0] != '-' && s[0] != '+' {
			break
		}
		for _, ch := range s[1:] {
			switch ch {
			case 'c':
				cmode = cmode || s[0] == '-'
			case 's':
				stdin = true
			case 'o', 'O':
				i++ // -o pipefail
			}
		}
		i++
	}
	if i > len(args) {
		i = len(args)
	}
	operands = args[i:]
	if !cmode && (len(operands) == 0 || operands[0].s == "/dev/stdin" || operands[0].s == "/dev/fd/0") {
		stdin = true
	}
	return cmode, stdin, operands
}

// makeCmd classifies make: --eval and a makefile read from a stream hold
// make code that cannot be analysed; SHELL= on the command line replaces
// the program that runs every recipe.
func (c *classifier) makeCmd(args []arg) {
	makefile := func(f arg) {
		if f.s == "-" || fromStream(f) || strings.HasPrefix(f.s, "/dev/") && f.s != "/dev/null" {
			c.add(RiskDangerous, KeyExecOption, fmt.Sprintf("runs make code that cannot be analysed (make -f %s)", f.s))
			return
		}
		c.noteRan(f.s)
	}
	eval := func(v string) {
		c.add(RiskDangerous, KeyExecOption, fmt.Sprintf("runs make code that cannot be analysed (make --eval %s)", v))
	}
	for i := 0; i < len(args); i++ {
		s := args[i].s
		if strings.HasPrefix(s, "--") && len(s) > 2 {
			o, value := longOpt(args, &i)
			switch {
			case longMatch(o, "eval", 2):
				eval(value().s)
			case o == "file" || longMatch(o, "makefile", 2):
				makefile(value())
			case longMatch(o, "directory", 2), longMatch(o, "include-dir", 2), longMatch(o, "old-file", 2),
				longMatch(o, "assume-old", 8), longMatch(o, "new-file", 3), longMatch(o, "what-if", 2), longMatch(o, "assume-new", 8):
				value()
			}
			continue
		}
		if len(s) > 1 && s[0] == '-' {
			for j := 1; j < len(s); j++ {
				ch := s[j]
				if strings.IndexByte("EfCIoW", ch) >= 0 {
					v := clusterValue(args, &i, j)
					switch ch {
					case 'E':
						eval(v.s)
					case 'f':
						makefile(v)
					}
					break
				}
				if (ch == 'j' || ch == 'l') && j == len(s)-1 && i+1 < len(args) && isDigits(args[i+1].s) {
					i++
				}
				if ch == 'j' || ch == 'l' || ch == 'O' {
					break
				}
			}
			continue
		}
		lhs, val, ok := strings.Cut(s, "=")
		if !ok {
			continue
		}
		name := strings.TrimRight(lhs, ":+?! ")
		switch {
		case strings.HasSuffix(strings.TrimRight(lhs, " "), "!"):
			c.execOption(val, "make "+s, nil) // VAR!=command runs it
		case name == "SHELL" || name == ".SHELLFLAGS" || name == "MAKESHELL":
			f := strings.Fields(val)
			if name == ".SHELLFLAGS" || len(f) != 1 || !shells[commandName(f[0])] {
				c.add(RiskDangerous, KeyExecOption, fmt.Sprintf("replaces the shell that runs make's recipes (make %s)", s))
			}
		}
	}
}

// editorLike classifies vim, emacs, gdb and PowerShell, which take
// commands of their own language in options.
func (c *classifier) editorLike(name string, args []arg) {
	if vimNames[name] || name == "emacsclient" {
		c.editorRemote(name, args)
	}
	inline := func(why string) {
		c.add(RiskDangerous, KeyInlineCode, fmt.Sprintf("runs inline interpreter code that cannot be analysed (%s %s)", name, why))
	}
	for i := 0; i < len(args); i++ {
		s := args[i].s
		next := func() string {
			if i+1 < len(args) {
				i++
				return args[i].s
			}
			return ""
		}
		switch name {
		case "gdb", "cgdb":
			t := strings.TrimLeft(s, "-")
			switch {
			case s == "--args":
				if i+1 < len(args) {
					c.command(args[i+1:], cmdCtx{})
				}
				return
			case len(s) > 1 && s[0] == '-' && (t == "ex" || t == "iex" || strings.HasPrefix(t, "eval-command") || strings.HasPrefix(t, "init-eval-command")):
				inline(s)
				return
			case s == "-x" || s == "--command" || s == "-ix" || s == "--init-command":
				c.noteRan(next())
			case strings.HasPrefix(s, "--command=") || strings.HasPrefix(s, "-command="):
				_, f, _ := strings.Cut(s, "=")
				c.noteRan(f)
			}
		case "pwsh", "powershell", "pwsh-preview":
			o := strings.ToLower(strings.TrimLeft(s, "-/"))
			if len(s) < 2 || s[0] != '-' && s[0] != '/' || o == "" {
				c.noteRan(s) // the script file
				return
			}
			switch {
			case strings.HasPrefix("command", o) || strings.HasPrefix("encodedcommand", o) || o == "ec" ||
				strings.HasPrefix("commandwithargs", o) || o == "cwa":
				inline(s)
				return
			case strings.HasPrefix("file", o):
				c.noteRan(next())
				return
			case strings.HasPrefix("executionpolicy", o) || o == "ep" || o == "ex" || strings.HasPrefix("workingdirectory", o) ||
				o == "wd" || strings.HasPrefix("configurationname", o) || strings.HasPrefix("settingsfile", o) ||
				strings.HasPrefix("windowstyle", o) || strings.HasPrefix("inputformat", o) || strings.HasPrefix("outputformat", o) ||
				strings.HasPrefix("custompipename", o) || strings.HasPrefix("configurationfile", o):
				if i+1 < len(args) && !optionLike(args[i+1].s) {
					i++
				}
			}
		case "emacs", "emacsclient", "xemacs":
			o := strings.TrimLeft(s, "-")
			switch {
			case o == "eval" || o == "execute" || strings.HasPrefix(s, "--eval=") || name == "emacsclient" && s == "-e":
				inline(s)
				return
			case o == "l" || o == "load" || o == "script":
				c.noteRan(next())
			}
		default: // vim and friends
			switch {
			case s == "-c" || s == "--cmd":
				inline(s + " " + next())
				return
			case len(s) > 1 && s[0] == '+' && !isDigits(s[1:]) && s[1] != '/' && s[1] != '?':
				inline(s)
				return
			case s == "-S" || s == "-u" || s == "-s":
				if f := next(); f != "NONE" && f != "NORC" {
					c.noteRan(f)
				}
			}
		}
	}
}

// tmuxShellCommands are the tmux commands that take a shell command, with
// their options that take a value.
var tmuxShellCommands = map[string]string{
	"new-session": "cefFnstxy", "new": "cefFnstxy", "new-window": "cefFnt", "neww": "cefFnt",
	"split-window": "cefFltp", "splitw": "cefFltp", "respawn-pane": "cet", "respawnp": "cet",
	"respawn-window": "cet", "respawnw": "cet", "run-shell": "cdt", "run": "cdt", "if-shell": "t", "if": "t",
	"pipe-pane": "t", "pipep": "t", "display-popup": "bcdehsStTwxy", "popup": "bcdehsStTwxy",
}

// tmux and screen start shells and windows that run a command string.
//
// Both talk to the user's server, which runs what it is asked outside the
// command and its sandbox: every tmux or screen command but the ones that
// only print a version or list sessions is user-service.
func (c *classifier) tmux(name string, args []arg) {
	if !tmuxLocal(name, args) {
		c.add(RiskDangerous, KeyUserService, fmt.Sprintf("talks to the user's %s server, which runs commands outside this command (%s)", name, joinArgs(args)))
	}
	if name == "screen" {
		// screen [options] [cmd [args]]: the first operand starts a command;
		// screen -X stuff TEXT types TEXT into a running session.
		o, rest, _ := parseOpts(args, optSpec{shortArg: "cehpsStT"})
		switch {
		case o.has("X"):
			if len(rest) > 1 && rest[0].s == "stuff" {
				c.nested(decodeEcho(joinArgs(rest[1:])))
			}
		case len(rest) > 0:
			c.command(rest, cmdCtx{})
		}
		return
	}
	// tmux [options] command [flags] [shell-command]; commands chain with ";".
	_, rest, _ := parseOpts(args, optSpec{shortArg: "cfLST"})
	for len(rest) > 0 {
		sub := rest[0].s
		end := 1
		for end < len(rest) && rest[end].s != ";" && rest[end].s != `\;` {
			end++
		}
		cmd := rest[1:end]
		if values, ok := tmuxShellCommands[sub]; ok {
			_, ops := parseAll(cmd, optSpec{shortArg: values})
			if sub == "if-shell" || sub == "if" {
				ops = ops[:min(len(ops), 1)]
			}
			if len(ops) > 0 {
				c.nested(joinArgs(ops))
			}
		}
		switch sub {
		case "send-keys", "send":
			_, ops := parseAll(cmd, optSpec{shortArg: "NtcT"})
			var keys []string
			for _, k := range ops {
				if k.s != "Enter" && k.s != "C-m" && k.s != "KPEnter" {
					keys = append(keys, k.s)
				}
			}
			c.nested(strings.Join(keys, " "))
		}
		if end >= len(rest) {
			break
		}
		rest = rest[end+1:]
	}
}

// tmuxLocal reports whether a tmux or screen command stays in the client:
// tmux -V; screen -v, -ls, -list, -h.
func tmuxLocal(name string, args []arg) bool {
	if len(args) != 1 {
		return false
	}
	if name == "tmux" {
		return args[0].s == "-V"
	}
	switch args[0].s {
	case "-v", "-ls", "-list", "--version", "-h", "--help":
		return true
	}
	return false
}

// parallel runs its command (a shell string) once per argument.
func (c *classifier) parallel(args []arg) {
	o, rest, _ := parseOpts(args, optSpec{shortArg: "jSaIdENnLsPxX", longArg: []string{"jobs", "sshlogin", "arg-file", "joblog",
		"results", "delimiter", "tmpdir", "workdir", "wd", "colsep", "timeout", "max-args", "max-lines", "sshloginfile", "basefile",
		"return", "retries", "delay", "memfree", "load", "tag-string", "tagstring", "env", "halt", "rpl"}})
	if j, ok := o.get("j", "P", "--jobs"); ok && (strings.TrimLeft(j, "0") == "" || strings.HasSuffix(j, "%") && len(j) > 4) {
		c.add(RiskDangerous, KeyResourceExhaustion, fmt.Sprintf("starts as many jobs as it can (parallel -j %s)", j))
	}
	var cmd, inputs []string
	seen := false
	for _, a := range rest {
		switch {
		case a.s == ":::" || a.s == "::::" || a.s == ":::+" || a.s == "::::+":
			seen = true
		case seen:
			if len(inputs) < maxBraceExpansions {
				inputs = append(inputs, a.s)
			}
		default:
			cmd = append(cmd, a.s)
		}
	}
	if len(cmd) == 0 {
		return
	}
	c.nested(strings.Join(append(cmd, inputs...), " "))
}

func init() {
	register(func(c *classifier, name string, args []arg, cx cmdCtx) {
		cmode, stdin, ops := shellInvocation(args)
		switch {
		case cmode && len(ops) > 0:
			c.nested(ops[0].s)
		case stdin && cx.stdin != nil:
			c.nested(cx.stdin.s)
		}
		c.interpreter(name, args, cx)
	}, keys(shells)...)
	register(func(c *classifier, _ string, args []arg, _ cmdCtx) {
		for _, a := range args {
			if n, v, ok := strings.Cut(a.s, "="); ok && n != "" {
				c.aliasesDaemonCLI("alias "+n, v)
				c.nested(v)
			}
		}
	}, "alias")
	register(func(c *classifier, name string, args []arg, cx cmdCtx) {
		if _, ops := parseAll(args, optSpec{}); len(ops) > 0 {
			switch {
			case ops[0].word != nil && c.procSubstSource(ops[0].word):
			case fromStream(ops[0]) && cx.stdin != nil:
				c.nested(cx.stdin.s)
			case fromStream(ops[0]):
				c.add(RiskDangerous, KeyPipeToShell, fmt.Sprintf("runs generated commands in a shell (%s %s)", name, ops[0].s))
			default:
				c.noteShellRan(ops[0].s, false)
			}
		}
	}, "source", ".")
	register(func(c *classifier, _ string, args []arg, _ cmdCtx) {
		if len(args) > 0 {
			c.nested(joinArgs(args))
		}
	}, "eval")
	register(func(c *classifier, _ string, args []arg, _ cmdCtx) {
		if _, ops := parseAll(args, optSpec{}); len(ops) > 1 && ops[0].s != "-" && ops[0].s != "" {
			c.nested(ops[0].s)
		}
	}, "trap")
	editor := func(c *classifier, name string, args []arg, _ cmdCtx) { c.editorLike(name, args) }
	register(editor, "gdb", "cgdb", "pwsh", "powershell", "pwsh-preview", "emacs", "emacsclient", "xemacs")
	register(editor, keys(vimNames)...)
	register(func(c *classifier, name string, args []arg, _ cmdCtx) { c.tmux(name, args) }, "tmux", "screen")
	register(func(c *classifier, _ string, args []arg, _ cmdCtx) { c.parallel(args) }, "parallel")
	register(func(c *classifier, _ string, args []arg, _ cmdCtx) { c.makeCmd(args) }, "make", "gmake")
}
