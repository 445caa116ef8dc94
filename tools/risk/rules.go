package risk

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// cmdCtx is what a simple command's statement tells about it.
type cmdCtx struct {
	stdin      *arg // here-document or here-string fed to it, if any
	stdinFile  *arg // file redirected to its standard input (< f), if any
	xargs      bool // runs under xargs, with arguments read from its input
	xargsKnown bool // runs under xargs fed by a static echo whose words are already in its arguments
}

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

var (
	shells      = set("sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "posh", "fish", "rbash", "ksh93", "pdksh", "tcsh", "csh")
	downloaders = set("curl", "wget", "fetch", "http", "https", "xh", "lwp-request", "GET", "aria2c")
	shutdowns   = set("shutdown", "reboot", "halt", "poweroff")
	mkfsLike    = set("mke2fs", "mkswap", "mkdosfs", "mkntfs", "mkexfatfs", "newfs")
	diskTools   = set("wipefs", "sfdisk", "sgdisk", "blkdiscard", "fdisk", "gdisk", "parted", "cfdisk")
	killByName  = set("pkill", "killall", "killall5")
	searchTools = set("grep", "egrep", "fgrep", "rg", "ag", "ack", "zgrep", "git-grep")
	sqlClients  = set("psql", "mysql", "mariadb", "sqlite3", "sqlite", "sqlcmd", "duckdb", "clickhouse-client",
		"clickhouse", "cockroach", "redis-cli", "mongo", "mongosh", "cqlsh", "usql", "pgcli", "mycli", "litecli")
	systemDirs = set("bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "opt", "proc", "root",
		"run", "sbin", "srv", "sys", "usr", "var", "snap", "nix", "System", "Library", "Applications", "Users", "private")
	systemSubdirs = set("usr/bin", "usr/sbin", "usr/lib", "usr/lib32", "usr/lib64", "usr/libexec", "usr/share",
		"usr/include", "usr/local", "var/lib", "private/etc", "private/var")
	rcFiles = set(".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zprofile",
		".zshenv", ".zlogin", ".zlogout", ".kshrc", ".mkshrc", ".cshrc", ".tcshrc", "config.fish", ".bash_aliases")
	safeDevices  = set("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/stdout", "/dev/stderr", "/dev/stdin", "/dev/tty")
	blockDevices = regexp.MustCompile(`^/dev/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme[0-9]|mmcblk[0-9]|r?disk[0-9]|md[0-9]|md/|dm-[0-9]|mapper/|loop[0-9]|nbd[0-9]|sr[0-9]|zd[0-9]|bcache[0-9]|disk/|root$)`)
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
	inline := func(why string) {
		c.add(RiskDangerous, "inline-code", fmt.Sprintf("runs inline interpreter code that cannot be analysed (%s %s)", name, why))
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
			c.add(RiskDangerous, "pipe-to-shell", fmt.Sprintf("runs generated commands in a shell (%s %s)", name, p.script.s))
		}
	case p.script != nil:
		if strings.HasPrefix(p.script.s, "http://") || strings.HasPrefix(p.script.s, "https://") {
			c.add(RiskDangerous, "curl-pipe-shell", fmt.Sprintf("runs a downloaded script (%s %s)", name, p.script.s))
		}
		c.noteRan(p.script.s)
	case p.stdin && kind != "shell":
		switch {
		case cx.stdin != nil:
			inline("program from a here-document")
		case cx.stdinFile != nil:
			c.noteRan(cx.stdinFile.s)
		}
	case p.stdin && cx.stdinFile != nil:
		c.noteRan(cx.stdinFile.s)
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
	c.add(RiskDangerous, "pipe-to-shell", "runs generated commands in a shell (… <(…))")
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

// command classifies one simple command given as rendered words and
// returns it with its wrappers peeled off.
func (c *classifier) command(args []arg, cx cmdCtx) resolved {
	r := resolve(args)
	for _, e := range r.elevated {
		c.add(RiskDangerous, "privilege-elevation", fmt.Sprintf("runs with elevated privileges (%s)", e))
	}
	for _, src := range r.shellSrc {
		c.nested(src)
	}
	for _, w := range r.writes {
		c.writeTarget(w, "output file")
	}
	for _, e := range r.execs {
		c.add(RiskDangerous, "exec-option", fmt.Sprintf("runs a program named in an option, which cannot be analysed (%s)", e))
	}
	for _, f := range r.scripts {
		c.noteRan(f.s)
	}
	for _, e := range r.envs {
		name, val, _ := strings.Cut(e.s, "=")
		c.envAssign(name, arg{s: val})
	}
	if r.detached != "" {
		c.add(RiskDangerous, "scheduled-command", fmt.Sprintf("runs a command in the background, outside this session (%s)", r.detached))
	}
	if r.dynamic {
		c.add(RiskDangerous, "dynamic-command", fmt.Sprintf("command name is computed at run time (%s)", r.dynText))
		return r
	}
	if r.name == "" {
		return r
	}
	if strings.Contains(r.word, "/") {
		c.noteRan(r.word) // ./s.sh; a bare name is looked up in $PATH
	}
	cx.xargs = cx.xargs || r.xargs && !cx.xargsKnown
	c.rules(r.name, r.args, cx)
	return r
}

// rules applies the per-command rules to a resolved command.
func (c *classifier) rules(name string, args []arg, cx cmdCtx) {
	switch {
	case name == "rm":
		c.rm(args, cx)
	case name == "find":
		c.find(args)
	case name == "dd":
		c.dd(args)
	case strings.HasPrefix(name, "mkfs") || mkfsLike[name]:
		c.add(RiskHardline, "mkfs", fmt.Sprintf("creates a filesystem, destroying the device's data (%s)", name))
	case diskTools[name]:
		if o, _ := parseAll(args, optSpec{}); !o.has("l", "--list") || name == "wipefs" || name == "blkdiscard" {
			c.add(RiskDangerous, "disk-partition", fmt.Sprintf("rewrites disk partitions or signatures (%s)", name))
		}
	case shutdowns[name]:
		c.add(RiskHardline, "shutdown", fmt.Sprintf("shuts down or reboots the machine (%s)", name))
	case name == "init" || name == "telinit":
		if _, ops := parseAll(args, optSpec{}); len(ops) > 0 && (ops[0].s == "0" || ops[0].s == "6") {
			c.add(RiskHardline, "shutdown", fmt.Sprintf("shuts down or reboots the machine (%s %s)", name, ops[0].s))
		}
	case name == "systemctl" || name == "loginctl":
		_, ops := parseAll(args, optSpec{shortArg: "HMtpsnoP", longArg: []string{"host", "machine", "type", "property", "signal", "lines", "output", "state", "kill-whom", "root", "job-mode", "when", "message"}})
		if len(ops) > 0 {
			switch ops[0].s {
			case "poweroff", "reboot", "halt", "kexec", "soft-reboot":
				c.add(RiskHardline, "shutdown", fmt.Sprintf("shuts down or reboots the machine (%s %s)", name, ops[0].s))
			}
		}
	case name == "chmod":
		c.chmod(args)
	case name == "chown" || name == "chgrp":
		c.chown(name, args)
	case name == "git":
		c.git(args)
	case name == "kill":
		c.kill(args)
	case killByName[name]:
		c.add(RiskDangerous, "pkill", fmt.Sprintf("kills processes by name (%s)", name))
	case name == "truncate" || name == "shred":
		_, ops := parseAll(args, optSpec{shortArg: "srn", longArg: []string{"size", "reference", "iterations", "random-source"}})
		for _, t := range ops {
			c.writeTarget(t, name)
		}
		c.add(RiskDangerous, name, fmt.Sprintf("destroys file contents (%s)", name))
	case name == "sessionctl":
		// A command that answers or steers the daemon's own sessions would
		// let the model approve its own gated commands: only a person may.
		_, ops := parseAll(args, optSpec{longArg: []string{"home", "timeout", "choice", "generation", "cwd", "title", "model", "input-id"}})
		if len(ops) > 0 && sessionctlControl[ops[0].s] {
			c.add(RiskDangerous, "sessiond-control", fmt.Sprintf("answers or steers sessiond's sessions (sessionctl %s): only a person may", ops[0].s))
		}
	case name == "crontab":
		o, ops := parseAll(args, optSpec{shortArg: "u"})
		switch {
		case o.has("r", "--remove"):
			c.add(RiskDangerous, "crontab-remove", "removes the crontab (crontab -r)")
		case o.has("-") || len(ops) > 0:
			c.add(RiskDangerous, "crontab-replace", "replaces the crontab (crontab FILE)")
		}
	case name == "curl":
		o, _ := parseAll(args, curlSpec)
		c.optTargets(name, o, "o", "--output", "D", "--dump-header", "c", "--cookie-jar")
	case name == "wget":
		o, _ := parseAll(args, wgetSpec)
		c.optTargets(name, o, "O", "--output-document", "o", "--output-file", "a", "--append-output")
	case name == "tee":
		_, ops := parseAll(args, optSpec{longArg: []string{"output-error"}})
		for _, t := range ops {
			c.writeTarget(t, "tee")
		}
	case name == "cp" || name == "mv" || name == "ln" || name == "install" || name == "rsync" || name == "scp":
		c.copyDest(name, args)
	case name == "sftp":
		c.sshProgramOptions(name, args)
	case name == "sed" || name == "gsed":
		c.sed(args)
	case awkNames[name]:
		c.awk(name, args)
	case name == "make" || name == "gmake":
		c.makeCmd(args)
	case name == "tar" || name == "gtar" || name == "bsdtar":
		c.tar(args)
	case name == "zip":
		c.zip(args)
	case name == "7z" || name == "7za" || name == "7zz" || name == "7zr":
		for _, a := range args {
			if a.s == "-sdel" {
				c.add(RiskDangerous, "remove-source-files", "deletes the files it archives (7z -sdel)")
			}
		}
	case name == "at" || name == "batch":
		c.at(name, args, cx)
	case name == "alias":
		for _, a := range args {
			if n, v, ok := strings.Cut(a.s, "="); ok && n != "" {
				c.nested(v)
			}
		}
	case name == "source" || name == ".":
		if _, ops := parseAll(args, optSpec{}); len(ops) > 0 {
			switch {
			case ops[0].word != nil && c.procSubstSource(ops[0].word):
			case fromStream(ops[0]) && cx.stdin != nil:
				c.nested(cx.stdin.s)
			case fromStream(ops[0]):
				c.add(RiskDangerous, "pipe-to-shell", fmt.Sprintf("runs generated commands in a shell (%s %s)", name, ops[0].s))
			default:
				c.noteRan(ops[0].s)
			}
		}
	case name == "gdb" || name == "cgdb" || name == "pwsh" || name == "powershell" || name == "pwsh-preview" ||
		name == "emacs" || name == "emacsclient" || name == "xemacs" || vimNames[name]:
		c.editorLike(name, args)
	case name == "tmux" || name == "screen":
		c.tmux(name, args)
	case name == "parallel":
		c.parallel(args)
	case name == "cd" || name == "pushd" || name == "popd":
		c.cd(name, args)
	case name == "eval":
		if len(args) > 0 {
			c.nested(joinArgs(args))
		}
	case name == "trap":
		if _, ops := parseAll(args, optSpec{}); len(ops) > 1 && ops[0].s != "-" && ops[0].s != "" {
			c.nested(ops[0].s)
		}
	case shells[name]:
		cmode, stdin, ops := shellInvocation(args)
		switch {
		case cmode && len(ops) > 0:
			c.nested(ops[0].s)
		case stdin && cx.stdin != nil:
			c.nested(cx.stdin.s)
		}
		c.interpreter(name, args, cx)
	case name == "dropdb":
		c.add(RiskDangerous, "sql-destructive", "drops a database (dropdb)")
	}

	if k := interpreterKind(name); k != "" && k != "shell" {
		c.interpreter(name, args, cx)
	}
	if interpreterKind(name) != "" || name == "source" || name == "." || name == "eval" {
		words := args
		if cx.stdin != nil {
			words = append(words[:len(words):len(words)], *cx.stdin)
		}
		for _, a := range words {
			if wordRunsDownloader(a.word) {
				c.add(RiskDangerous, "curl-pipe-shell", fmt.Sprintf("runs a downloaded script (%s fed by curl/wget)", name))
				break
			}
		}
	}
	if cx.xargs && name == "rm" {
		c.add(RiskDangerous, "xargs-rm", "deletes files named by its input (xargs rm)")
	}

	if !searchTools[name] {
		lenient := sqlClients[name]
		for _, a := range args {
			c.sqlScan(a.s, lenient)
			if lenient {
				c.sqlShell(name, a.s)
			}
		}
		if lenient && cx.stdin != nil {
			c.sqlScan(cx.stdin.s, true)
			c.sqlShell(name, cx.stdin.s)
		}
	}
}

var (
	curlSpec = optSpec{shortArg: "AbcdDeEFHKmoPQrTuUwxXyYz", longArg: []string{"output", "output-dir", "data", "data-raw",
		"data-binary", "data-urlencode", "form", "header", "request", "user-agent", "referer", "user", "proxy",
		"upload-file", "range", "write-out", "config", "cookie", "cookie-jar", "dump-header", "max-time",
		"connect-timeout", "retry", "url", "cacert", "cert", "key"}}
	wgetSpec = optSpec{shortArg: "aABDeiIlOoPQRtTUwX", longArg: []string{"output-document", "output-file",
		"append-output", "directory-prefix", "tries", "timeout", "user-agent", "execute", "input-file", "wait",
		"quota", "level", "accept", "reject", "domains", "header", "user", "password", "post-data", "post-file",
		"body-data", "method"}}
)

// optTargets classifies the files named by the given options as written.
func (c *classifier) optTargets(name string, o opts, keys ...string) {
	for _, k := range keys {
		if v, ok := o[k]; ok && v != "-" {
			c.writeTarget(arg{s: v}, name)
		}
	}
}

// wordRunsDownloader reports whether a word holds a command or process
// substitution that runs curl, wget or another downloader.
func wordRunsDownloader(w *syntax.Word) bool {
	if w == nil {
		return false
	}
	found := false
	syntax.Walk(w, func(n syntax.Node) bool {
		if found {
			return false
		}
		if call, ok := n.(*syntax.CallExpr); ok && len(call.Args) > 0 {
			if downloaders[resolve(renderArgs(call.Args)).name] {
				found = true
			}
		}
		return !found
	})
	return found
}

// longMatch reports whether the long option o (without dashes or value)
// is an abbreviation of full that is at least min characters long.
func longMatch(o, full string, min int) bool {
	return len(o) >= min && strings.HasPrefix(full, o)
}

func (c *classifier) rm(args []arg, cx cmdCtx) {
	var recursive, force, noPreserve, computed bool
	var targets []arg
	end := false
	for _, a := range args {
		s := a.s
		switch {
		case end:
			targets = append(targets, a)
		case a.dynStart:
			computed = true // may expand to -rf
			targets = append(targets, a)
		case s == "--":
			end = true
		case strings.HasPrefix(s, "--"):
			o, _, _ := strings.Cut(s[2:], "=")
			recursive = recursive || longMatch(o, "recursive", 1)
			force = force || longMatch(o, "force", 1)
			noPreserve = noPreserve || longMatch(o, "no-preserve-root", 1)
		case len(s) > 1 && s[0] == '-':
			if a.dyn {
				computed = true
			}
			recursive = recursive || strings.ContainsAny(s[1:], "rR")
			force = force || strings.ContainsRune(s[1:], 'f')
		default:
			targets = append(targets, a)
		}
	}
	// dynamic: some target is computed at run time, so that no approval
	// given to a literal "rm -rf build" may cover it.
	dynamic, dynText := cx.xargs, "xargs rm -r"
	if recursive {
		if noPreserve {
			c.add(RiskHardline, "rm-root", "recursive delete with --no-preserve-root")
		}
		for _, t := range targets {
			if c.deleteTarget(t, "rm -r") && !dynamic {
				dynamic, dynText = true, "rm -r "+t.s
			}
		}
	}
	switch {
	case recursive && dynamic:
		c.add(RiskDangerous, "rm-recursive-dynamic", fmt.Sprintf("recursive delete of a path computed at run time (%s)", dynText))
	case recursive && force:
		c.add(RiskDangerous, "rm-recursive", "recursive forced delete (rm -rf)")
	case recursive:
		c.add(RiskDangerous, "rm-recursive", "recursive delete (rm -r)")
	case computed:
		c.add(RiskDangerous, "rm-computed-args", "rm with options computed at run time")
		if force {
			c.add(RiskDangerous, "rm-force", "forced delete (rm -f)")
		}
	case force:
		c.add(RiskDangerous, "rm-force", "forced delete (rm -f)")
	}
}

// deleteTarget classifies one path that a command deletes recursively
// (rm -r, find -delete): the root, a home or a system directory is
// hardline, and so is a path that is one of those when its run-time
// expansions come out empty (/$x, "$dir"/*, ${x:-/}). A directory above
// the working directory is delete-ancestor. It reports whether the path
// is computed at run time.
func (c *classifier) deleteTarget(t arg, via string) (dynamic bool) {
	cands := []string{t.s}
	if t.dyn && !onlyHome(t.word) {
		dynamic = true
		cands = append(cands, c.minimal(t.word)...)
	}
	for _, p := range cands {
		if c.critical(p, true) {
			c.add(RiskHardline, "rm-root", fmt.Sprintf("recursive delete of a root, home or system directory (%s %s)", via, t.s))
			return dynamic
		}
	}
	if _, ok := c.abs(t.s); !ok {
		return true // relative to a directory computed at run time
	}
	for _, p := range cands {
		a, _ := c.abs(p)
		up, contents := climb(a)
		switch {
		case up >= 3 && contents:
			c.add(RiskHardline, "delete-ancestor",
				fmt.Sprintf("recursive delete of a directory %d levels above the working directory (%s %s)", up, via, t.s))
		case up >= 1 && contents:
			c.add(RiskDangerous, "delete-ancestor",
				fmt.Sprintf("recursive delete of the working directory's parent (%s %s)", via, t.s))
		case up >= 3:
			c.add(RiskDangerous, "delete-ancestor",
				fmt.Sprintf("recursive delete %d levels above the working directory (%s %s)", up, via, t.s))
		}
	}
	return dynamic
}

// climb looks at a cleaned path relative to the starting directory: how
// many levels it climbs (leading ".."), and whether it names that
// ancestor itself or all its contents (.., ../*, ../../.*).
func climb(p string) (up int, contents bool) {
	for p == ".." || strings.HasPrefix(p, "../") {
		up++
		p = strings.TrimPrefix(strings.TrimPrefix(p, ".."), "/")
	}
	return up, p == "" || p == "*" || p == ".*"
}

// onlyHome reports whether the only run-time expansion in w is $HOME or
// ${HOME}, which the classifier treats as known.
func onlyHome(w *syntax.Word) bool {
	if w == nil {
		return false
	}
	ok := true
	syntax.Walk(w, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.ParamExp:
			if n.Param == nil || n.Param.Value != "HOME" || !simpleParam(n) {
				ok = false
			}
			return false
		case *syntax.CmdSubst, *syntax.ArithmExp, *syntax.ProcSubst, *syntax.ExtGlob:
			ok = false
			return false
		}
		return ok
	})
	return ok
}

// homeDir stands for the user's home directory in the paths the
// classifier resolves: /home/NAME has the shape of a home directory.
const homeDir = "/home/~"

// cwdState is what the classifier knows of one working directory.
type cwdState struct {
	// dir is a cleaned path: absolute ("/etc", homeDir+"/.ssh"), relative
	// to the directory the command starts in ("..", "src"), or "" for
	// that starting directory.
	dir string
	// dyn is set when the directory is computed at run time ("cd $x"): the
	// place of relative paths is unknown.
	dyn bool
	// risky is set, with dyn, when that directory could be the root or a
	// home directory (cd ${x:-/}, cd "$x/"), so that "rm -rf *" there is
	// treated as a wipe.
	risky bool
}

// shellDir is the working directory of the shell being classified, the
// previous one (for cd -) and pushd's stack.
type shellDir struct {
	cwd, prev cwdState
	stack     []cwdState
}

// maxDirStack bounds pushd's stack, maxDirLen the working directory
// followed through cd (longer is treated as unknown).
const (
	maxDirStack = 16
	maxDirLen   = 512
)

// abs resolves path p against the working directory: an absolute path
// (with ~ and $HOME as homeDir), or a path relative to the starting
// directory. ok is false when p is relative to a directory computed at
// run time.
func (c *classifier) abs(p string) (string, bool) {
	if p == "" {
		return "", true
	}
	if rest, ok := homeRelative(p); ok {
		return path.Clean(homeDir + "/" + rest), true
	}
	if p[0] == '/' {
		return path.Clean(p), true
	}
	cwd := c.dir.cwd
	if cwd.dyn {
		return "", false
	}
	if cwd.dir == "" {
		return path.Clean(p), true
	}
	return path.Clean(cwd.dir + "/" + p), true
}

// cd follows cd, pushd and popd.
func (c *classifier) cd(name string, args []arg) {
	d := &c.dir
	_, ops := parseAll(args, optSpec{})
	if name == "popd" {
		if n := len(d.stack); n > 0 {
			d.prev, d.cwd = d.cwd, d.stack[n-1]
			d.stack = d.stack[: n-1 : n-1] // a later push copies: saved states keep theirs
		}
		return
	}
	var next cwdState
	switch {
	case len(ops) == 0 && name == "pushd":
		if n := len(d.stack); n > 0 {
			top := d.stack[n-1]
			d.stack = append(d.stack[:n-1:n-1], d.cwd)
			d.prev, d.cwd = d.cwd, top
		}
		return
	case len(ops) == 0:
		next = cwdState{dir: homeDir} // cd alone goes home
	case ops[0].s == "-" && !ops[0].dyn:
		next = d.prev
	case ops[0].dyn:
		next = cwdState{dyn: true}
		for _, p := range minimalRenderings(ops[0].word) {
			if p != "" && c.critical(p, true) {
				next.risky = true
			}
		}
	default:
		p := ops[0].s
		if a, ok := c.abs(p); ok {
			next = cwdState{dir: a}
		} else {
			// Relative to an unknown directory: climbing out of it may reach
			// the root or home.
			next = cwdState{dyn: true, risky: d.cwd.risky && (p == ".." || strings.HasPrefix(p, "../"))}
		}
	}
	if len(next.dir) > maxDirLen {
		next = cwdState{dyn: true} // bounded work: a very deep directory is unknown
	}
	if name == "pushd" && len(d.stack) < maxDirStack {
		d.stack = append(d.stack[:len(d.stack):len(d.stack)], d.cwd)
	}
	d.prev, d.cwd = d.cwd, next
}

// criticalAny is critical for a path as written or, when it is computed
// at run time, as it reads when its expansions come out empty (/$x).
func (c *classifier) criticalAny(t arg, homes bool) bool {
	if c.critical(t.s, homes) {
		return true
	}
	if t.dyn {
		for _, p := range c.minimal(t.word) {
			if c.critical(p, homes) {
				return true
			}
		}
	}
	return false
}

// minimal is minimalRenderings for w, remembered for the last word: brace
// expansion makes several arguments of one word, which come in a row and
// must not each redo the work (nor be checked again).
func (c *classifier) minimal(w *syntax.Word) []string {
	if w == nil {
		return nil
	}
	if w == c.minWord {
		return nil // its renderings were checked with the previous argument
	}
	c.minWord = w
	return minimalRenderings(w)
}

// critical reports whether deleting (or recursively changing) path p
// would wipe the root, a home directory (when homes is set) or a
// top-level system directory, given the working directory.
func (c *classifier) critical(p string, homes bool) bool {
	a, ok := c.abs(p)
	if !ok {
		if !c.dir.cwd.risky {
			return false
		}
		switch path.Clean(p) {
		case ".", "*", ".*", "..", "../*":
			return true
		}
		return false
	}
	if a == "" || a[0] != '/' {
		return false
	}
	a = strings.TrimSuffix(a, "/*")
	a = strings.TrimSuffix(a, "/.*")
	if a == "" || a == "/" {
		return true
	}
	parts := strings.Split(a[1:], "/")
	switch len(parts) {
	case 1:
		return systemDirs[parts[0]] || hasGlob(parts[0])
	case 2:
		return systemSubdirs[a[1:]] || homes && (parts[0] == "home" || parts[0] == "Users") ||
			systemDirs[parts[0]] && hasGlob(parts[1])
	}
	return false
}

// homeRelative splits ~, ~user, $HOME and ${HOME} (rendered as $HOME)
// off a path and returns the rest.
func homeRelative(p string) (string, bool) {
	switch {
	case p == "~" || p == "$HOME":
		return "", true
	case strings.HasPrefix(p, "$HOME/"):
		return p[len("$HOME/"):], true
	case strings.HasPrefix(p, "~"):
		user, rest, _ := strings.Cut(p[1:], "/")
		if strings.ContainsAny(user, "$*?[") || user == "+" || user == "-" {
			return "", false
		}
		return rest, true
	}
	return "", false
}

func hasGlob(s string) bool { return strings.ContainsAny(s, "*?[") }

// writeTarget classifies a file that a command writes to. Relative paths
// are resolved against the working directory (cd ~/.ssh && echo k >>
// authorized_keys).
func (c *classifier) writeTarget(t arg, via string) {
	p := t.s
	if p == "" {
		return
	}
	norm := c.writePath(p)
	if strings.HasPrefix(norm, "/dev/") {
		clean := path.Clean(norm)
		switch {
		case safeDevices[clean] || strings.HasPrefix(clean, "/dev/fd/") || strings.HasPrefix(clean, "/dev/pts/") || strings.HasPrefix(clean, "/dev/shm/"):
		case blockDevices.MatchString(clean):
			c.add(RiskHardline, "block-device-write", fmt.Sprintf("writes to block device %s (%s)", clean, via))
		default:
			c.add(RiskDangerous, "device-write", fmt.Sprintf("writes to device %s (%s)", clean, via))
		}
		return
	}
	if strings.HasPrefix(norm, "/proc/") || strings.HasPrefix(norm, "/sys/") {
		if clean := path.Clean(norm); clean == "/proc/sysrq-trigger" {
			c.add(RiskHardline, "sysrq", fmt.Sprintf("writes to %s, which can reboot or crash the machine (%s)", clean, via))
		} else {
			c.add(RiskDangerous, "kernel-write", fmt.Sprintf("changes kernel settings (%s %s)", via, clean))
		}
		return
	}
	c.noteWritten(p)
	switch {
	case strings.HasPrefix(norm, "/etc/") || norm == "/etc" || strings.HasPrefix(norm, "/private/etc/"):
		c.add(RiskDangerous, "write-etc", fmt.Sprintf("writes into /etc (%s %s)", via, p))
	case hasComponent(norm, ".ssh"):
		c.add(RiskDangerous, "write-ssh", fmt.Sprintf("writes into ~/.ssh (%s %s)", via, p))
	case strings.HasSuffix(norm, ".gitconfig") || strings.HasSuffix(norm, ".git/config") || strings.Contains(norm, ".git/hooks/") ||
		strings.HasSuffix(norm, ".config/git/config") || strings.HasSuffix(norm, ".git/hooks"):
		c.add(RiskDangerous, "write-git-config", fmt.Sprintf("writes git configuration or hooks, which can run commands (%s %s)", via, p))
	case rcFiles[norm[strings.LastIndexByte(norm, '/')+1:]]:
		c.add(RiskDangerous, "write-shell-rc", fmt.Sprintf("writes to a shell startup file (%s %s)", via, p))
	}
}

// writePath is the path that writeTarget judges for p: resolved against
// the working directory when that can matter (an absolute or home path, a
// working directory outside the start or below a .ssh), p itself
// otherwise, which spares the work on long relative paths.
func (c *classifier) writePath(p string) string {
	cwd := c.dir.cwd
	if p == "" || cwd.dyn && p[0] != '/' && p[0] != '~' && !strings.HasPrefix(p, "$HOME") {
		return p
	}
	if p[0] == '/' || p[0] == '~' || strings.HasPrefix(p, "$HOME") || strings.HasPrefix(cwd.dir, "/") || strings.Contains(cwd.dir, ".ssh") {
		a, _ := c.abs(p)
		return a
	}
	return p
}

// emptied flags a command that destroys the contents of file t (": > f",
// "cp /dev/null f"). Devices are left to writeTarget.
func (c *classifier) emptied(t arg, what string) {
	norm := c.writePath(t.s)
	if t.s == "" || strings.HasPrefix(norm, "/dev/") || strings.HasPrefix(norm, "/proc/") || strings.HasPrefix(norm, "/sys/") {
		return
	}
	c.add(RiskDangerous, "truncate", fmt.Sprintf("destroys file contents (%s)", what))
}

// hasComponent reports whether the slash-separated path p has a component
// named name.
func hasComponent(p, name string) bool {
	for p != "" {
		var part string
		part, p, _ = strings.Cut(p, "/")
		if part == name {
			return true
		}
	}
	return false
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func (c *classifier) find(args []arg) {
	i := 0
	for i < len(args) {
		s := args[i].s
		if s == "-H" || s == "-L" || s == "-P" || strings.HasPrefix(s, "-O") {
			i++
			continue
		}
		if s == "-D" {
			i += 2
			continue
		}
		break
	}
	var paths []arg
	for ; i < len(args); i++ {
		s := args[i].s
		if strings.HasPrefix(s, "-") || s == "(" || s == "!" || s == ")" || s == "," {
			break
		}
		paths = append(paths, args[i])
	}
	del := false
	for ; i < len(args); i++ {
		switch args[i].s {
		case "-delete":
			del = true
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(args) && args[j].s != ";" && args[j].s != "+" {
				j++
			}
			inner := args[i+1 : j]
			if len(inner) > 0 {
				switch resolve(inner).name {
				case "rm", "unlink", "shred":
					del = true
				}
				c.command(inner, cmdCtx{})
			}
			i = j
		}
	}
	if !del {
		return
	}
	if len(paths) == 0 && c.critical(".", true) {
		c.add(RiskHardline, "find-root-delete", "find deleting from a root, home or system directory")
	}
	for _, p := range paths {
		if c.criticalAny(p, true) {
			c.add(RiskHardline, "find-root-delete", fmt.Sprintf("find deleting from a root, home or system directory (find %s -delete)", p.s))
		}
	}
	c.add(RiskDangerous, "find-delete", "deletes the files find matches (find -delete / -exec rm)")
}

func (c *classifier) dd(args []arg) {
	for _, a := range args {
		out, ok := strings.CutPrefix(a.s, "of=")
		if !ok {
			continue
		}
		clean := path.Clean(out)
		switch {
		case !strings.HasPrefix(out, "/dev/"):
			c.writeTarget(arg{s: out}, "dd")
		case safeDevices[clean] || strings.HasPrefix(clean, "/dev/fd/") || strings.HasPrefix(clean, "/dev/shm/"):
		case blockDevices.MatchString(clean):
			c.add(RiskHardline, "dd-block-device", fmt.Sprintf("dd writes to block device %s", clean))
		default:
			c.add(RiskDangerous, "dd-device", fmt.Sprintf("dd writes to device %s", clean))
		}
	}
}

func (c *classifier) chmod(args []arg) {
	var recursive, ref bool
	var ops []arg
	end := false
	for _, a := range args {
		s := a.s
		switch {
		case end || a.dynStart:
			ops = append(ops, a)
		case s == "--":
			end = true
		case strings.HasPrefix(s, "--"):
			o, _, _ := strings.Cut(s[2:], "=")
			recursive = recursive || longMatch(o, "recursive", 3)
			ref = ref || longMatch(o, "reference", 3)
		case len(s) > 1 && s[0] == '-' && strings.Trim(s[1:], "Rcfv") == "":
			recursive = recursive || strings.ContainsRune(s, 'R')
		default:
			ops = append(ops, a) // includes modes such as -w
		}
	}
	mode, targets := "", ops
	if !ref && len(ops) > 0 {
		mode, targets = ops[0].s, ops[1:]
	}
	if recursive {
		for _, t := range targets {
			if c.criticalAny(t, false) {
				c.add(RiskHardline, "chmod-root", fmt.Sprintf("recursive permission change of the root or a system directory (chmod -R %s)", t.s))
			}
		}
	}
	if worldWritable(mode) {
		c.add(RiskDangerous, "chmod-world-writable", fmt.Sprintf("makes files world-writable (chmod %s)", mode))
	}
	if recursive {
		c.add(RiskDangerous, "chmod-recursive", "recursive permission change (chmod -R)")
	}
}

// worldWritable reports whether a chmod mode grants write to others.
func worldWritable(mode string) bool {
	if mode == "" {
		return false
	}
	if v, err := strconv.ParseUint(mode, 8, 32); err == nil {
		return v&0o002 != 0
	}
	for _, clause := range strings.Split(mode, ",") {
		i := 0
		for i < len(clause) && strings.IndexByte("ugoa", clause[i]) >= 0 {
			i++
		}
		who := clause[:i]
		for i < len(clause) {
			op := clause[i]
			if op != '+' && op != '-' && op != '=' {
				break
			}
			i++
			j := i
			for j < len(clause) && strings.IndexByte("rwxXstugo", clause[j]) >= 0 {
				j++
			}
			perms := clause[i:j]
			i = j
			if op != '-' && strings.ContainsRune(perms, 'w') && (who == "" || strings.ContainsAny(who, "ao")) {
				return true
			}
		}
	}
	return false
}

func (c *classifier) chown(name string, args []arg) {
	var recursive, ref bool
	var ops []arg
	end := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		s := a.s
		switch {
		case end || a.dynStart:
			ops = append(ops, a)
		case s == "--":
			end = true
		case strings.HasPrefix(s, "--"):
			o, _, hasVal := strings.Cut(s[2:], "=")
			recursive = recursive || longMatch(o, "recursive", 3)
			ref = ref || longMatch(o, "reference", 3)
			if longMatch(o, "from", 2) && !hasVal {
				i++
			}
		case len(s) > 1 && s[0] == '-':
			recursive = recursive || strings.ContainsRune(s, 'R')
		default:
			ops = append(ops, a)
		}
	}
	targets := ops
	if !ref && len(ops) > 0 {
		targets = ops[1:]
	}
	if !recursive {
		return
	}
	for _, t := range targets {
		if c.criticalAny(t, false) {
			c.add(RiskHardline, "chown-root", fmt.Sprintf("recursive ownership change of the root or a system directory (%s -R %s)", name, t.s))
		}
	}
	c.add(RiskDangerous, "chown-recursive", fmt.Sprintf("recursive ownership change (%s -R)", name))
}

func (c *classifier) copyDest(name string, args []arg) {
	sp := optSpec{shortArg: "StT", longArg: []string{"target-directory", "suffix", "backup"}}
	switch name {
	case "install":
		sp.shortArg = "gmoStT"
		sp.longArg = append(sp.longArg, "group", "mode", "owner", "strip-program")
	case "rsync":
		sp = optSpec{shortArg: "efTBM", longArg: []string{"rsh", "filter", "temp-dir", "block-size", "exclude", "include", "exclude-from", "include-from", "files-from", "out-format", "log-file", "password-file", "chmod", "chown", "rsync-path"}}
	case "scp":
		sp = optSpec{shortArg: "cFiJloPS"}
	}
	o, ops := parseAll(args, sp)
	switch name {
	case "rsync":
		if sh, ok := o.get("e", "--rsh"); ok {
			c.execOption(sh, "rsync -e "+sh, sshCmds)
		}
		for k := range o {
			switch {
			case k == "--del" || strings.HasPrefix(k, "--delete"):
				c.add(RiskDangerous, "rsync-delete", fmt.Sprintf("deletes files at the destination (rsync %s)", k))
			case k == "--remove-source-files" || k == "--remove-sent-files":
				c.add(RiskDangerous, "remove-source-files", fmt.Sprintf("deletes the files it copies (rsync %s)", k))
			}
		}
	case "scp":
		c.sshProgramOptions(name, args)
	}
	if t, ok := o.get("t", "--target-directory"); ok && name != "rsync" && name != "scp" {
		c.writeTarget(arg{s: t}, name)
		return
	}
	if len(ops) < 2 {
		return
	}
	dest := ops[len(ops)-1]
	c.writeTarget(dest, name)
	switch name {
	case "mv":
		if d, _ := c.abs(dest.s); d == "/dev/null" {
			c.add(RiskDangerous, "remove-source-files", "moves files into /dev/null, destroying them (mv … /dev/null)")
		}
	case "cp", "install":
		for _, src := range ops[:len(ops)-1] {
			if src.s == "/dev/null" {
				c.emptied(dest, name+" /dev/null "+dest.s)
			}
		}
	}
}

// sshProgramOptions classifies scp's and sftp's -o options like ssh's, and
// -S PROGRAM (-D for sftp), which replaces the ssh program.
func (c *classifier) sshProgramOptions(name string, args []arg) {
	var r resolved
	sshOptions(args, optSpec{shortArg: "cFiJloPSDBRs"}, &r)
	for _, src := range r.shellSrc {
		c.execOption(src, name+" -o", sshCmds)
	}
	for _, e := range r.execs {
		c.add(RiskDangerous, "exec-option", fmt.Sprintf("runs a program named in an option, which cannot be analysed (%s)", e))
	}
	o, _ := parseAll(args, optSpec{shortArg: "cFiJloPSDBRs"})
	for _, k := range []string{"S", "D"} {
		if v, ok := o[k]; ok && !harmless(v, sshCmds) {
			c.add(RiskDangerous, "exec-option", fmt.Sprintf("runs a program named in an option (%s -%s %s)", name, k, v))
		}
	}
}

func (c *classifier) kill(args []arg) {
	i := 0
	if len(args) > 0 {
		s := args[0].s
		switch {
		case s == "-l" || s == "-L" || s == "--list":
			return
		case s == "-s" || s == "-n" || s == "--signal":
			i = 2
		case s == "--":
			i = 1
		case strings.HasPrefix(s, "-"):
			i = 1
		}
	}
	if i < len(args) && args[i].s == "--" {
		i++
	}
	for ; i < len(args); i++ {
		switch args[i].s {
		case "-1":
			c.add(RiskDangerous, "kill-all", "signals every process you may signal (kill -1)")
		case "1":
			c.add(RiskDangerous, "kill-all", "signals init (kill 1)")
		}
	}
}

func (c *classifier) git(args []arg) {
	i := 0
	for i < len(args) {
		s := args[i].s
		switch {
		case s == "-c":
			if i+1 < len(args) {
				c.gitConfig(args[i+1].s)
			}
			i += 2
			continue
		case s == "--config-env" || strings.HasPrefix(s, "--config-env="):
			// --config-env=KEY=ENVVAR: the value comes from the environment.
			v, ok := strings.CutPrefix(s, "--config-env=")
			if !ok && i+1 < len(args) {
				i++
				v = args[i].s
			}
			key, _, _ := strings.Cut(v, "=")
			if gitCommandKey(strings.ToLower(key)) != "" {
				c.add(RiskDangerous, "exec-option", fmt.Sprintf("sets a git command from the environment (git --config-env %s)", v))
			}
			i++
			continue
		case strings.HasPrefix(s, "--exec-path="):
			c.add(RiskDangerous, "exec-option", fmt.Sprintf("runs git commands from another directory (git %s)", s))
			i++
			continue
		case s == "-C" || s == "--git-dir" || s == "--work-tree" || s == "--namespace" || s == "--super-prefix":
			i += 2
			continue
		case strings.HasPrefix(s, "-"):
			i++
			continue
		}
		break
	}
	if i >= len(args) {
		return
	}
	sub, rest := args[i].s, args[i+1:]
	o, ops := parseAll(rest, optSpec{shortArg: "omsCcb", longArg: []string{"push-option", "message", "repo", "receive-pack", "exec"}})
	longHas := func(full string, min int) bool {
		for k := range o {
			if strings.HasPrefix(k, "--") && longMatch(k[2:], full, min) {
				return true
			}
		}
		return false
	}
	switch sub {
	case "reset":
		if longHas("hard", 3) {
			c.add(RiskDangerous, "git-reset-hard", "discards uncommitted changes (git reset --hard)")
		}
	case "clean":
		if (o.has("f") || longHas("force", 3)) && !o.has("n") && !longHas("dry-run", 3) {
			c.add(RiskDangerous, "git-clean-force", "deletes untracked files (git clean -f)")
		}
	case "push":
		force := o.has("f") || longHas("force", 3) || longHas("force-with-lease", 7) || longHas("mirror", 2)
		del := o.has("d") || longHas("delete", 3) || longHas("prune", 3)
		for j, op := range ops {
			if strings.HasPrefix(op.s, "+") {
				force = true
			}
			if j > 0 && strings.HasPrefix(op.s, ":") {
				del = true
			}
		}
		if force {
			c.add(RiskDangerous, "git-push-force", "force push rewrites remote history (git push --force)")
		}
		if del {
			c.add(RiskDangerous, "git-push-delete", "deletes remote branches or tags (git push --delete / :branch)")
		}
		if v, ok := o.get("--receive-pack", "--exec"); ok {
			c.execOption(v, "git push --receive-pack", nil)
		}
	case "checkout":
		dashdash := false
		for _, a := range rest {
			if a.s == "--" {
				dashdash = true
			}
		}
		discard := o.has("f") || longHas("force", 3) || dashdash && len(ops) > 0
		for _, op := range ops {
			if op.s == "." || op.s == ":/" || op.s == "*" {
				discard = true
			}
		}
		if discard {
			c.add(RiskDangerous, "git-discard-changes", "discards uncommitted changes (git checkout -- …)")
		}
	case "restore":
		staged := o.has("S") || longHas("staged", 2)
		worktree := o.has("W") || longHas("worktree", 2)
		if len(ops) > 0 && (!staged || worktree) {
			c.add(RiskDangerous, "git-discard-changes", "discards uncommitted changes (git restore)")
		}
	case "switch":
		if o.has("f") || longHas("force", 3) || longHas("discard-changes", 2) {
			c.add(RiskDangerous, "git-discard-changes", "discards uncommitted changes (git switch --discard-changes)")
		}
	case "stash":
		if len(ops) > 0 && (ops[0].s == "drop" || ops[0].s == "clear") {
			c.add(RiskDangerous, "git-stash-drop", fmt.Sprintf("deletes stashed changes (git stash %s)", ops[0].s))
		}
		if (len(ops) == 0 || ops[0].s == "push" || ops[0].s == "save") &&
			(o.has("u", "a") || longHas("include-untracked", 3) || longHas("all", 2)) {
			c.add(RiskDangerous, "git-stash-untracked", "removes untracked files from the working tree into a stash (git stash -u)")
		}
	case "worktree":
		if len(ops) > 0 && ops[0].s == "remove" && (o.has("f") || longHas("force", 3)) {
			c.add(RiskDangerous, "git-worktree-remove-force", "deletes a worktree with its uncommitted changes (git worktree remove --force)")
		}
	case "config":
		c.gitConfigWrite(rest)
	case "submodule":
		for j, a := range rest {
			if a.s == "foreach" {
				if cmd := rest[j+1:]; len(cmd) > 0 {
					for len(cmd) > 1 && strings.HasPrefix(cmd[0].s, "-") {
						cmd = cmd[1:] // --recursive, -q
					}
					c.nested(joinArgs(cmd))
				}
				break
			}
		}
	case "bisect":
		for j, a := range rest {
			if a.s == "run" {
				if j+1 < len(rest) {
					c.command(rest[j+1:], cmdCtx{})
				}
				break
			}
		}
	case "rebase", "filter-branch", "grep", "difftool", "mergetool", "clone", "fetch", "pull", "ls-remote", "archive":
		c.gitCommandOptions(sub, rest)
	case "branch":
		if o.has("D") || (o.has("d") || longHas("delete", 3)) && (o.has("f") || longHas("force", 3)) {
			c.add(RiskDangerous, "git-branch-force-delete", "force-deletes a branch (git branch -D)")
		}
	}
}

// gitConfig looks at one "git -c key=value": aliases are classified as
// the git command or (with !) the shell command they stand for, and
// settings that name commands run them.
func (c *classifier) gitConfig(kv string) {
	key, val, _ := strings.Cut(kv, "=")
	c.gitSetting(strings.ToLower(key), val, "git -c "+kv)
}

// gitCommandKey says what kind of command a git setting names: "alias",
// "pager", "editor", "ssh", "credential", "fsmonitor", "cmd" (any
// command), "path" (a directory or file of code that cannot be analysed),
// or "" for settings that run nothing.
func gitCommandKey(key string) string {
	parts := strings.Split(key, ".")
	sec, last := parts[0], parts[len(parts)-1]
	switch {
	case sec == "alias" && len(parts) >= 2:
		return "alias"
	case key == "core.pager" || sec == "pager" && len(parts) == 2:
		return "pager"
	case key == "core.editor" || key == "sequence.editor":
		return "editor"
	case key == "core.sshcommand":
		return "ssh"
	case sec == "credential" && last == "helper":
		return "credential"
	case key == "core.fsmonitor":
		return "fsmonitor"
	case key == "core.hookspath" || key == "include.path" || sec == "includeif" && last == "path" || key == "init.templatedir":
		return "path"
	case key == "core.askpass" || key == "diff.external" || sec == "gpg" && last == "program" || key == "core.gitproxy" ||
		key == "uploadpack.packobjectshook" || sec == "filter" && (last == "clean" || last == "smudge" || last == "process") ||
		sec == "merge" && last == "driver" || sec == "diff" && (last == "textconv" || last == "command") ||
		sec == "remote" && (last == "uploadpack" || last == "receivepack") || key == "sendemail.sendmailcmd" ||
		(sec == "difftool" || sec == "mergetool" || sec == "browser" || sec == "man" || sec == "web") && (last == "cmd" || last == "path" || last == "browser") ||
		key == "core.alternaterefscommand":
		return "cmd"
	}
	return ""
}

// gitSetting classifies the value of a git setting that names a command.
func (c *classifier) gitSetting(key, val, via string) {
	switch gitCommandKey(key) {
	case "alias":
		if cmd, ok := strings.CutPrefix(val, "!"); ok {
			c.nested(cmd)
		} else {
			c.nested("git " + val) // an alias body is a git command line
		}
	case "pager":
		c.execOption(val, via, pagerCmds)
	case "editor":
		c.execOption(val, via, editorCmds)
	case "ssh":
		c.execOption(val, via, sshCmds)
	case "credential":
		if cmd, ok := strings.CutPrefix(val, "!"); ok {
			c.execOption(cmd, via, nil)
		} else if strings.ContainsAny(val, "/ ") {
			c.add(RiskDangerous, "exec-option", fmt.Sprintf("runs a program named in a setting (%s)", via))
		}
	case "fsmonitor":
		switch strings.ToLower(val) {
		case "", "true", "false", "yes", "no", "on", "off", "1", "0":
		default:
			c.add(RiskDangerous, "exec-option", fmt.Sprintf("runs a program named in a setting (%s)", via))
		}
	case "path":
		c.add(RiskDangerous, "exec-option", fmt.Sprintf("makes git run code that cannot be analysed (%s)", via))
	case "cmd":
		c.execOption(val, via, nil)
	}
}

// gitConfigWrite classifies "git config": writing an alias or a setting
// that names a command defines a command for later git runs.
func (c *classifier) gitConfigWrite(args []arg) {
	o, ops := parseAll(args, optSpec{shortArg: "f", longArg: []string{"file", "blob", "type", "default", "comment", "value", "url"}})
	for k := range o {
		switch k {
		case "l", "e", "--list", "--edit", "--get", "--get-all", "--get-regexp", "--get-urlmatch", "--get-color",
			"--get-colorbool", "--unset", "--unset-all", "--remove-section", "--rename-section":
			return
		}
	}
	var key, val string
	switch {
	case len(ops) >= 3 && ops[0].s == "set":
		key, val = ops[1].s, ops[2].s
	case len(ops) > 0 && (ops[0].s == "get" || ops[0].s == "list" || ops[0].s == "unset" || ops[0].s == "set" ||
		ops[0].s == "rename-section" || ops[0].s == "remove-section" || ops[0].s == "edit"):
		return
	case len(ops) >= 2:
		key, val = ops[0].s, ops[1].s
	default:
		return
	}
	lk := strings.ToLower(key)
	if gitCommandKey(lk) == "" {
		return
	}
	c.add(RiskDangerous, "git-config-command", fmt.Sprintf("configures git to run a command (git config %s)", key))
	c.gitSetting(lk, val, "git config "+key)
}

// gitCommandOptions classifies the options of git commands that run a
// command: rebase --exec, filter-branch filters, grep -O, difftool -x,
// --upload-pack and friends.
func (c *classifier) gitCommandOptions(sub string, args []arg) {
	for i := 0; i < len(args); i++ {
		s := args[i].s
		if s == "--" {
			return
		}
		name, val, hasVal := strings.Cut(s, "=")
		value := func() string {
			if hasVal {
				return val
			}
			if i+1 < len(args) {
				i++
				return args[i].s
			}
			return ""
		}
		switch {
		case sub == "rebase" && (name == "--exec" || name == "-x"):
			c.nested(value())
		case sub == "rebase" && len(s) > 2 && s[0] == '-' && s[1] != '-' && strings.ContainsRune(s, 'x'):
			if j := strings.IndexByte(s, 'x'); j == len(s)-1 {
				c.nested(value())
			} else {
				c.nested(s[j+1:])
			}
		case sub == "filter-branch" && strings.HasSuffix(name, "-filter") && name != "--subdirectory-filter":
			c.nested(value())
		case sub == "grep" && (name == "--open-files-in-pager" || strings.HasPrefix(s, "-O")):
			v := strings.TrimPrefix(s, "-O")
			if name == "--open-files-in-pager" {
				v = val
			}
			if v != "" {
				c.execOption(v, "git grep -O", pagerCmds)
			}
		case (sub == "difftool" || sub == "mergetool") && (name == "--extcmd" || name == "-x"):
			v := value()
			c.execOption(v, "git "+sub+" --extcmd "+v, nil)
		case name == "--upload-pack" || name == "--exec" || sub == "clone" && name == "-u":
			v := value()
			c.execOption(v, "git "+sub+" "+name+" "+v, nil)
		}
	}
}

// SQL statements that destroy data. Inside SQL clients (psql -c, sqlite3,
// here-documents fed to them) they match in any case; elsewhere only in
// upper case, so that prose such as "drop table support" in a commit
// message stays safe. Comments are removed first (DROP/**/TABLE,
// DROP--x⏎TABLE), under the lexical rules of several dialects, since a
// comment inside a string in one dialect is code in another.
var (
	sqlStrict = regexp.MustCompile(`(?m)\b(DROP\s+(TABLE|DATABASE|SCHEMA)\b|TRUNCATE\s+(TABLE\b|[\w."]+\s*(;|$))|DELETE\s+FROM\s+[\w."]+\s*(;|$)|FLUSHALL\b|FLUSHDB\b)`)
	// sqlClient is for upper-cased SQL given to a client; DELETE without
	// WHERE is checked apart.
	sqlClient   = regexp.MustCompile(`\b(DROP\s+(TABLE|DATABASE|SCHEMA)\b|TRUNCATE\s+(TABLE\b|ONLY\b|[\w."]+)|FLUSHALL\b|FLUSHDB\b)`)
	sqlDelete   = regexp.MustCompile(`\bDELETE\s+FROM\b`)
	sqlWhere    = regexp.MustCompile(`\bWHERE\b`)
	sqlDialects = []struct{ backslash, nested bool }{{false, true}, {false, false}, {true, false}, {true, true}}
)

func (c *classifier) sqlScan(s string, lenient bool) {
	if len(s) < 7 {
		return
	}
	hay := s
	if lenient {
		hay = strings.ToUpper(s)
	}
	// The regular expressions are slow on long text: look for a keyword first.
	if !strings.Contains(hay, "DROP") && !strings.Contains(hay, "TRUNCATE") &&
		!strings.Contains(hay, "DELETE") && !strings.Contains(hay, "FLUSH") {
		return
	}
	m := sqlMatch(hay, lenient)
	if m == "" && (strings.Contains(hay, "--") || strings.Contains(hay, "/*") || lenient && strings.Contains(hay, "#")) {
		for _, d := range sqlDialects {
			if m = sqlMatch(stripSQLComments(hay, d.backslash, d.nested, lenient), lenient); m != "" {
				break
			}
		}
	}
	if m != "" {
		m = strings.Join(strings.Fields(m), " ")
		c.add(RiskDangerous, "sql-destructive", fmt.Sprintf("destructive SQL statement (%s)", strings.TrimSuffix(m, ";")))
	}
}

// sqlMatch finds a destructive statement in upper-case SQL (lenient) or
// in text (strict): DROP TABLE/DATABASE/SCHEMA, TRUNCATE, DELETE FROM
// without WHERE, FLUSHALL/FLUSHDB.
func sqlMatch(s string, lenient bool) string {
	if !lenient {
		return sqlStrict.FindString(s)
	}
	if m := sqlClient.FindString(s); m != "" {
		return m
	}
	for _, loc := range sqlDelete.FindAllStringIndex(s, 16) {
		stmt := s[loc[1]:]
		if end := strings.IndexByte(stmt, ';'); end >= 0 {
			stmt = stmt[:end]
		}
		if !sqlWhere.MatchString(stmt) {
			return "DELETE FROM … without WHERE"
		}
	}
	return ""
}

// stripSQLComments replaces SQL comments by spaces, skipping quoted
// strings and identifiers: backslash says whether a backslash escapes a
// quote (MySQL), nested whether block comments nest (PostgreSQL), hash
// whether # starts a comment (MySQL). The body of a MySQL executable
// comment (/*!…*/) is kept, since the server runs it.
func stripSQLComments(s string, backslash, nested, hash bool) string {
	var b strings.Builder
	b.Grow(len(s))
	exec := false // inside /*! … */
	for i := 0; i < len(s); {
		ch := s[i]
		switch {
		case ch == '\'' || ch == '"' || ch == '`':
			j := i + 1
			for j < len(s) {
				if backslash && s[j] == '\\' {
					j += 2
					continue
				}
				if s[j] == ch {
					if j+1 < len(s) && s[j+1] == ch {
						j += 2
						continue
					}
					j++
					break
				}
				j++
			}
			j = min(j, len(s))
			b.WriteString(s[i:j])
			i = j
		case ch == '-' && i+1 < len(s) && s[i+1] == '-', hash && ch == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
			b.WriteByte(' ')
		case ch == '/' && i+1 < len(s) && s[i+1] == '*' && i+2 < len(s) && s[i+2] == '!':
			i += 3
			for i < len(s) && s[i] >= '0' && s[i] <= '9' {
				i++
			}
			b.WriteByte(' ')
			exec = true
		case exec && ch == '*' && i+1 < len(s) && s[i+1] == '/':
			i += 2
			b.WriteByte(' ')
			exec = false
		case ch == '/' && i+1 < len(s) && s[i+1] == '*':
			depth := 1
			i += 2
			for i < len(s) && depth > 0 {
				switch {
				case s[i] == '*' && i+1 < len(s) && s[i+1] == '/':
					depth--
					i += 2
				case nested && s[i] == '/' && i+1 < len(s) && s[i+1] == '*':
					depth++
					i += 2
				default:
					i++
				}
			}
			b.WriteByte(' ')
		default:
			b.WriteByte(ch)
			i++
		}
	}
	return b.String()
}

// sqlShellRE finds the commands of SQL clients that run shell commands:
// sqlite3 .shell/.system and pipes in .once/.output/.import/.read, psql
// \! and \o | / \g |, mysql \! and system, and COPY … PROGRAM.
var sqlShellRE = regexp.MustCompile(`(?im)(^\s*\.(?:shell|system)\b|^\s*\.(?:once|output|import|read|excel)\s+(?:-\S+\s+)*['"]?\||\\!|\\[og]\s*\||\bprogram\s+['"]|^\s*system\s)`)

// sqlShell flags the shell escapes of SQL clients; the command after
// .shell, .system, \! or system is classified too.
func (c *classifier) sqlShell(client, s string) {
	if !strings.ContainsAny(s, ".\\|") && !strings.Contains(strings.ToLower(s), "system") && !strings.Contains(strings.ToLower(s), "program") {
		return
	}
	for _, loc := range sqlShellRE.FindAllStringIndex(s, 16) {
		m := strings.TrimSpace(s[loc[0]:loc[1]])
		rest := s[loc[1]:]
		if nl := strings.IndexByte(rest, '\n'); nl >= 0 {
			rest = rest[:nl]
		}
		switch strings.ToLower(strings.TrimRight(m, " \t")) {
		case ".shell", ".system", "\\!", "system":
			c.execOption(rest, client+" "+m+" "+strings.TrimSpace(rest), nil)
		default:
			c.add(RiskDangerous, "exec-option", fmt.Sprintf("SQL client runs a shell command (%s %s…)", client, m))
		}
	}
}

// sqlCheck scans here-documents and here-strings in the strict mode; the
// command they feed rescans them leniently when it is an SQL client.
func (c *classifier) sqlCheck(s string) { c.sqlScan(s, false) }

// Commands whose arguments hold another language that can run commands.

var (
	vimNames = set("vim", "vi", "nvim", "view", "vimdiff", "gvim", "ex", "evim", "gview", "nvi", "elvis")
	awkNames = set("awk", "gawk", "mawk", "nawk", "original-awk", "goawk", "bwk-awk")
	// harmless commands for settings that name a pager, an editor or an
	// ssh program: a value made of one of them and plain words runs
	// nothing else.
	pagerCmds  = set("cat", "less", "more", "most", "true", "false", ":")
	editorCmds = set("true", "false", ":", "cat", "vi", "vim", "nvim", "nano", "emacs", "ed")
	sshCmds    = set("ssh")
	// compressors that tar -I / --use-compress-program may name.
	compressors = set("gzip", "gunzip", "pigz", "unpigz", "bzip2", "bunzip2", "pbzip2", "lbzip2", "xz", "unxz", "pixz",
		"lzma", "unlzma", "lzip", "plzip", "lzop", "lz4", "zstd", "unzstd", "zstdmt", "pzstd", "brotli", "compress", "uncompress")
	// envCommands are environment variables whose value is a command that
	// programs run, with the harmless commands they may name.
	envCommands = map[string]map[string]bool{
		"GIT_SSH_COMMAND": sshCmds, "GIT_SSH": sshCmds, "RSYNC_RSH": sshCmds, "CVS_RSH": sshCmds,
		"PAGER": pagerCmds, "GIT_PAGER": pagerCmds, "MANPAGER": pagerCmds, "SYSTEMD_PAGER": pagerCmds, "BAT_PAGER": pagerCmds,
		"EDITOR": editorCmds, "VISUAL": editorCmds, "GIT_EDITOR": editorCmds, "GIT_SEQUENCE_EDITOR": editorCmds,
		"GIT_EXTERNAL_DIFF": nil, "GIT_PROXY_COMMAND": nil, "GIT_ASKPASS": pagerCmds, "SSH_ASKPASS": pagerCmds,
		"SUDO_ASKPASS": pagerCmds, "PROMPT_COMMAND": nil, "LESSOPEN": nil, "LESSCLOSE": nil, "BROWSER": nil,
	}
	// envPrograms are environment variables that make programs load code
	// that cannot be analysed.
	envPrograms = set("LD_PRELOAD", "LD_AUDIT", "DYLD_INSERT_LIBRARIES", "BASH_ENV", "ENV", "GIT_EXEC_PATH",
		"GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG", "GIT_TEMPLATE_DIR")
)

// harmless reports whether cmd, a command string, is empty or one of the
// allowed commands with plain arguments (less -R, ssh -i key).
func harmless(cmd string, allowed map[string]bool) bool {
	if strings.TrimSpace(cmd) == "" {
		return true
	}
	if allowed == nil || strings.ContainsAny(cmd, ";&|<>$`()\\\n'\"{}*?[") {
		return false
	}
	f := strings.Fields(cmd)
	return len(f) > 0 && allowed[commandName(f[0])]
}

// execOption classifies a shell command given in an option or setting
// (git -c core.pager=…, tar --to-command=…): it is parsed, and unless it
// is harmless it is dangerous in itself, since it is easy to overlook.
func (c *classifier) execOption(cmd, via string, allowed map[string]bool) {
	c.nested(cmd)
	if !harmless(cmd, allowed) {
		c.add(RiskDangerous, "exec-option", fmt.Sprintf("runs a command given in an option (%s)", via))
	}
}

// assign classifies a variable assignment (FOO=bar cmd, export FOO=bar):
// some variables hold commands that programs run.
func (c *classifier) assign(a *syntax.Assign) {
	if a.Name == nil || a.Value == nil {
		return
	}
	c.envAssign(a.Name.Value, renderString(a.Value))
}

func (c *classifier) envAssign(name string, v arg) {
	if allowed, ok := envCommands[name]; ok {
		c.execOption(v.s, name+"="+v.s, allowed)
		return
	}
	if envPrograms[name] || strings.HasPrefix(name, "GIT_CONFIG_KEY_") || strings.HasPrefix(name, "GIT_CONFIG_VALUE_") {
		c.add(RiskDangerous, "exec-option", fmt.Sprintf("makes programs load code that cannot be analysed (%s=%s)", name, v.s))
		if name == "BASH_ENV" || name == "ENV" {
			c.noteRan(v.s)
		}
	}
}

// atListing reports whether at's arguments only list, show or remove jobs.
func atListing(args []arg) bool {
	o, _ := parseAll(args, optSpec{shortArg: "qfmMt"})
	return o.has("l", "c", "r", "d", "V")
}

// awk classifies an awk program: system(), pipes (print | "cmd",
// "cmd" | getline) and extension loading run commands. A program computed
// at run time cannot be analysed.
func (c *classifier) awk(name string, args []arg) {
	var progs []arg
	haveProg, sandbox := false, false
	inline := func(why string) {
		c.add(RiskDangerous, "inline-code", fmt.Sprintf("runs inline interpreter code that cannot be analysed (%s %s)", name, why))
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
				c.add(RiskDangerous, "exec-option", fmt.Sprintf("loads an extension that cannot be analysed (%s --load)", name))
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
				v := arg{s: s[j+1:], dyn: a.dyn, word: a.word}
				if v.s == "" && i+1 < len(args) {
					i++
					v = args[i]
				}
				switch ch {
				case 'f', 'E', 'i':
					progFile(v)
				case 'e':
					progs = append(progs, v)
					haveProg = true
				case 'l':
					c.add(RiskDangerous, "exec-option", fmt.Sprintf("loads an extension that cannot be analysed (%s -l)", name))
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
			v := arg{s: s[j+1:], dyn: a.dyn, word: a.word}
			if v.s == "" && i+1 < len(args) {
				i++
				v = args[i]
			}
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
	deletesAll := false
	for _, sc := range scripts {
		if sc.dyn && !sandbox {
			c.add(RiskDangerous, "exec-option", fmt.Sprintf("sed script computed at run time may run commands (sed %s)", sc.s))
		}
		info := sedScan(sc.s)
		switch {
		case sandbox:
		case !info.ok:
			c.add(RiskDangerous, "exec-option", fmt.Sprintf("sed script that cannot be analysed may run commands (sed %s)", sc.s))
		case info.execSpace:
			c.add(RiskDangerous, "exec-option", "sed runs the text it edits as a command (e / s///e)")
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
	}
	if !inPlace {
		return
	}
	if deletesAll {
		c.add(RiskDangerous, "sed-in-place", "empties files in place (sed -i d)")
	}
	for _, f := range files {
		c.writeTarget(f, "sed -i")
		if c.outsideCwd(f.s) {
			c.add(RiskDangerous, "sed-in-place", fmt.Sprintf("edits files outside the working directory in place (sed -i … %s)", f.s))
		}
	}
}

// sedFile notes a sed script file; one read from a stream cannot be analysed.
func (c *classifier) sedFile(f arg) {
	if fromStream(f) || f.s == "" {
		c.add(RiskDangerous, "exec-option", fmt.Sprintf("sed script read from a stream may run commands (sed -f %s)", f.s))
		return
	}
	c.noteRan(f.s)
}

// outsideCwd reports whether path p is outside the starting directory:
// absolute, in a home directory, climbing out with "..", or relative to a
// directory computed at run time.
func (c *classifier) outsideCwd(p string) bool {
	if p == "" {
		return false
	}
	a, ok := c.abs(p)
	return !ok || a != "" && (a[0] == '/' || a == ".." || strings.HasPrefix(a, "../"))
}

// sedInfo is what sedScan finds in a sed script.
type sedInfo struct {
	ok         bool     // the script was understood
	exec       []string // commands given to e
	execSpace  bool     // e without a command, or s///e: runs the pattern space
	writes     []string // files named by w, W and s///w
	deletesAll bool     // d, D, c or z applies to every line
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
			if !delimited(d, cmd == 's') || !delimited(d, false) {
				return r
			}
			if cmd == 'y' {
				break
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

// makeCmd classifies make: --eval and a makefile read from a stream hold
// make code that cannot be analysed; SHELL= on the command line replaces
// the program that runs every recipe.
func (c *classifier) makeCmd(args []arg) {
	makefile := func(f arg) {
		if f.s == "-" || fromStream(f) || strings.HasPrefix(f.s, "/dev/") && f.s != "/dev/null" {
			c.add(RiskDangerous, "exec-option", fmt.Sprintf("runs make code that cannot be analysed (make -f %s)", f.s))
			return
		}
		c.noteRan(f.s)
	}
	eval := func(v string) {
		c.add(RiskDangerous, "exec-option", fmt.Sprintf("runs make code that cannot be analysed (make --eval %s)", v))
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
					v := arg{s: s[j+1:]}
					if v.s == "" && i+1 < len(args) {
						i++
						v = args[i]
					}
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
				c.add(RiskDangerous, "exec-option", fmt.Sprintf("replaces the shell that runs make's recipes (make %s)", s))
			}
		}
	}
}

// tar classifies the options of tar that run commands (--to-command,
// --checkpoint-action=exec=, -I PROGRAM, -F SCRIPT, --rsh-command), delete
// the archived files (--remove-files) or extract into a directory (-C).
func (c *classifier) tar(args []arg) {
	extract := false
	var dirs []arg
	short := func(ch byte, v arg) {
		switch ch {
		case 'I':
			c.tarCompressor(v.s)
		case 'F':
			c.execOption(v.s, "tar -F "+v.s, nil)
		case 'C':
			dirs = append(dirs, v)
		}
	}
	i := 0
	if len(args) > 0 && !strings.HasPrefix(args[0].s, "-") && !args[0].dyn && args[0].s != "" &&
		strings.Trim(args[0].s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") == "" {
		// Old-style options: tar xzf FILE, each value-taking letter takes the next word.
		i = 1
		for j := 0; j < len(args[0].s); j++ {
			ch := args[0].s[j]
			extract = extract || ch == 'x'
			if strings.IndexByte("fCIFTXbgKLNVH", ch) >= 0 && i < len(args) {
				short(ch, args[i])
				i++
			}
		}
	}
	for ; i < len(args); i++ {
		s := args[i].s
		if s == "--" {
			break
		}
		if strings.HasPrefix(s, "--") {
			o, optValue := longOpt(args, &i)
			value := func() string { return optValue().s }
			switch {
			case longMatch(o, "to-command", 4):
				c.execOption(value(), "tar --to-command", nil)
			case longMatch(o, "checkpoint-action", 11):
				if cmd, ok := strings.CutPrefix(value(), "exec="); ok {
					c.execOption(cmd, "tar --checkpoint-action=exec", nil)
				}
			case longMatch(o, "use-compress-program", 4):
				c.tarCompressor(value())
			case longMatch(o, "info-script", 3), longMatch(o, "new-volume-script", 4), longMatch(o, "rsh-command", 3), longMatch(o, "rmt-command", 3):
				v := value()
				c.execOption(v, "tar --"+o+" "+v, nil)
			case longMatch(o, "directory", 3):
				dirs = append(dirs, arg{s: value()})
			case longMatch(o, "remove-files", 3):
				c.add(RiskDangerous, "remove-source-files", "deletes the files it archives (tar --remove-files)")
			case longMatch(o, "extract", 3) || longMatch(o, "get", 3):
				extract = true
			case o == "file" || longMatch(o, "exclude", 3) || longMatch(o, "transform", 3) || longMatch(o, "files-from", 6):
				value()
			}
			continue
		}
		if len(s) > 1 && s[0] == '-' {
			for j := 1; j < len(s); j++ {
				ch := s[j]
				extract = extract || ch == 'x'
				if strings.IndexByte("fCIFTXbgKLNVH", ch) >= 0 {
					v := arg{s: s[j+1:]}
					if v.s == "" && i+1 < len(args) {
						i++
						v = args[i]
					}
					short(ch, v)
					break
				}
			}
		}
	}
	if extract {
		for _, d := range dirs {
			c.writeTarget(arg{s: strings.TrimRight(d.s, "/") + "/"}, "tar -x -C")
		}
	}
}

// tarCompressor classifies the program tar -I runs: a known compressor
// (with options) is fine, anything else cannot be analysed.
func (c *classifier) tarCompressor(prog string) {
	c.nested(prog)
	f := strings.Fields(prog)
	if len(f) == 0 || !compressors[commandName(f[0])] || strings.ContainsAny(prog, ";&|<>$`()") {
		c.add(RiskDangerous, "exec-option", fmt.Sprintf("runs a program as tar's compressor (tar -I %s)", prog))
	}
}

// zip: -m / --move deletes the files it archives; -TT names the command
// that tests the archive.
func (c *classifier) zip(args []arg) {
	for i := 0; i < len(args); i++ {
		s := args[i].s
		switch {
		case s == "--move":
			c.add(RiskDangerous, "remove-source-files", "deletes the files it archives (zip -m)")
		case s == "-TT" || s == "--unzip-command":
			if i+1 < len(args) {
				i++
				c.execOption(args[i].s, "zip -TT", nil)
			}
		case strings.HasPrefix(s, "--unzip-command="):
			c.execOption(s[len("--unzip-command="):], "zip -TT", nil)
		case len(s) > 1 && s[0] == '-' && s[1] != '-' && strings.ContainsRune(s, 'm') &&
			strings.Trim(s[1:], "0123456789abcdefghijklmnopqrstuvwxyzADFJLRSTUVX$@") == "":
			c.add(RiskDangerous, "remove-source-files", "deletes the files it archives (zip -m)")
		}
	}
}

// at and batch run commands later, outside this session.
func (c *classifier) at(name string, args []arg, cx cmdCtx) {
	if atListing(args) {
		return
	}
	c.add(RiskDangerous, "scheduled-command", fmt.Sprintf("schedules commands to run later, outside this session (%s)", name))
	if o, _ := parseAll(args, optSpec{shortArg: "qfmMt"}); o.has("f") {
		c.noteRan(o["f"])
	} else if cx.stdin != nil {
		c.nested(cx.stdin.s)
	}
}

// editorLike classifies vim, emacs, gdb and PowerShell, which take
// commands of their own language in options.
func (c *classifier) editorLike(name string, args []arg) {
	inline := func(why string) {
		c.add(RiskDangerous, "inline-code", fmt.Sprintf("runs inline interpreter code that cannot be analysed (%s %s)", name, why))
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
func (c *classifier) tmux(name string, args []arg) {
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

// parallel runs its command (a shell string) once per argument.
func (c *classifier) parallel(args []arg) {
	_, rest, _ := parseOpts(args, optSpec{shortArg: "jSaIdENnLsPxX", longArg: []string{"jobs", "sshlogin", "arg-file", "joblog",
		"results", "delimiter", "tmpdir", "workdir", "wd", "colsep", "timeout", "max-args", "max-lines", "sshloginfile", "basefile",
		"return", "retries", "delay", "memfree", "load", "tag-string", "tagstring", "env", "halt", "rpl"}})
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

// longOpt splits the long option args[*i] ("--name" or "--name=value") and
// returns its name and a function giving its value: the inline value, or
// the next argument, which the function consumes by advancing *i.
func longOpt(args []arg, i *int) (string, func() arg) {
	a := args[*i]
	o, val, hasVal := strings.Cut(a.s[2:], "=")
	return o, func() arg {
		if hasVal {
			return arg{s: val, dyn: a.dyn, word: a.word}
		}
		if *i+1 < len(args) {
			*i++
			return args[*i]
		}
		return arg{}
	}
}

// sessionctlControl are the sessionctl verbs that answer prompts or change
// what runs: a model must not run them on its own daemon unasked.
var sessionctlControl = map[string]bool{"approve": true, "answer": true, "resolve": true, "cancel": true,
	"interrupt": true, "send": true, "attach": true}
