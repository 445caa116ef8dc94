package tools

import (
	"fmt"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Risk is the danger level of a terminal command, as decided by [Classify].
type Risk string

const (
	// RiskSafe commands run without asking (unless approvals are "strict").
	RiskSafe Risk = "safe"
	// RiskDangerous commands need an approval in "manual" mode: recursive or
	// forced rm, chmod 777, curl … | sh, git reset --hard, force pushes,
	// writes to ~/.ssh or shell rc files, DROP TABLE, sudo, unparseable
	// input, command names computed at run time, ….
	RiskDangerous Risk = "dangerous"
	// RiskHardline commands are never run, whatever the approval mode:
	// rm -rf /, mkfs, fork bombs, dd or redirection to a block device,
	// shutdown/reboot, find / -delete, chmod -R / chown -R of /, ….
	RiskHardline Risk = "hardline"
)

// rank orders risks; unknown values rank like dangerous.
func (r Risk) rank() int {
	switch r {
	case RiskSafe:
		return 0
	case RiskHardline:
		return 2
	default:
		return 1
	}
}

// Classification is the verdict of [Classify] on one command string.
type Classification struct {
	// Risk is the worst risk found across every simple command.
	Risk Risk `json:"risk"`
	// Reason says why, for people, e.g. "recursive forced delete (rm -rf)".
	// Empty when Risk is safe. When several rules of the worst risk match,
	// their reasons are joined with "; " in the order they were found.
	Reason string `json:"reason"`
	// Pattern is the stable key of the matched rule, e.g. "rm-recursive"; an
	// approval with choice "session" or "always" allows this pattern. When
	// several distinct rules of the worst risk match, Pattern is their keys
	// sorted and joined with "+" (e.g. "git-push-force+rm-recursive"), so an
	// approval for one rule never silently covers another. Rule keys contain
	// only [a-z0-9-]. Empty when Risk is safe.
	Pattern string `json:"pattern"`
}

// Classify parses command as bash (mvdan.cc/sh/v3/syntax) and returns the
// worst risk across every simple command it contains: pipelines, lists
// (&&, ||, ;), subshells, blocks, command and process substitutions,
// function bodies, here-documents fed to a shell, commands behind wrappers
// (sudo, doas, env, xargs, nice, nohup, timeout, command, exec, time,
// stdbuf, ionice, setsid, watch, flock, busybox, …) and the strings passed
// to sh/bash/zsh/dash -c, eval, trap, su -c and git aliases, which are
// parsed again (up to a fixed nesting depth).
//
// Input that does not parse is dangerous (reason "could not parse command:
// …"), never safe, and so is a command whose name is computed at run time
// ($x args, $(echo rm) -rf). Classify never panics: an internal failure is
// reported as dangerous. It is safe for concurrent use.
//
// Classification is static and best effort: it does not know the working
// directory or the contents of scripts and files the command runs, nor
// code passed to non-shell interpreters (python -c, perl -e, awk) or run
// inside containers (docker run, kubectl exec).
//
// Rule keys (Classification.Pattern):
//
//   - hardline: rm-root, find-root-delete, chmod-root, chown-root, mkfs,
//     fork-bomb, dd-block-device, block-device-write, shutdown, sysrq.
//   - dangerous: rm-recursive, rm-force, rm-computed-args, xargs-rm,
//     find-delete, chmod-world-writable, chmod-recursive, chown-recursive,
//     curl-pipe-shell, pipe-to-shell, git-reset-hard, git-clean-force,
//     git-push-force, git-discard-changes, git-stash-drop,
//     git-branch-force-delete, write-ssh, write-shell-rc, write-etc,
//     device-write, dd-device, kernel-write, sql-destructive, kill-all,
//     pkill, truncate, shred, crontab-remove, crontab-replace,
//     disk-partition, privilege-elevation.
//   - dangerous because the command could not be analysed: unparseable,
//     dynamic-command, nested-shell, too-complex, internal-error. They name
//     no particular action, so callers may prefer not to remember
//     "session" or "always" approvals for them.
func Classify(command string) (c Classification) {
	defer func() {
		if r := recover(); r != nil {
			c = Classification{Risk: RiskDangerous, Pattern: "internal-error",
				Reason: fmt.Sprintf("could not classify command: %v", r)}
		}
	}()
	return classify(command)
}

// classify is Classify without the panic guard, for the fuzz test.
func classify(command string) Classification {
	c := &classifier{seen: map[string]int{}, pipes: map[*syntax.BinaryCmd]bool{}}
	c.source(command)
	return c.result()
}

// maxNesting bounds how deeply strings handed to sh -c, eval and friends
// are parsed again; deeper nesting is itself dangerous.
const maxNesting = 8

// maxNestedBytes bounds the total size of the strings parsed again for one
// Classify call, so that brace expansion feeding nested evals cannot make
// the work explode; beyond it the command is dangerous.
const maxNestedBytes = 1 << 20

type finding struct {
	risk            Risk
	pattern, reason string
}

type classifier struct {
	findings []finding
	seen     map[string]int // pattern -> index in findings
	depth    int
	nestedN  int // bytes parsed again so far, bounded by maxNestedBytes
	// cwdRisky is set after "cd /", "cd ~" and the like, so that a later
	// "rm -rf *" is treated as a wipe of that directory.
	cwdRisky bool
	pipes    map[*syntax.BinaryCmd]bool // pipelines already analysed as part of a larger one
}

func (c *classifier) add(r Risk, pattern, reason string) {
	if i, ok := c.seen[pattern]; ok {
		if r.rank() > c.findings[i].risk.rank() {
			c.findings[i] = finding{r, pattern, reason}
		}
		return
	}
	c.seen[pattern] = len(c.findings)
	c.findings = append(c.findings, finding{r, pattern, reason})
}

func (c *classifier) result() Classification {
	worst := RiskSafe
	for _, f := range c.findings {
		if f.risk.rank() > worst.rank() {
			worst = f.risk
		}
	}
	if worst == RiskSafe {
		return Classification{Risk: RiskSafe}
	}
	var patterns, reasons []string
	for _, f := range c.findings {
		if f.risk == worst {
			patterns = append(patterns, f.pattern)
			reasons = append(reasons, f.reason)
		}
	}
	slices.Sort(patterns)
	return Classification{Risk: worst, Pattern: strings.Join(patterns, "+"), Reason: strings.Join(reasons, "; ")}
}

func newParser() *syntax.Parser {
	return syntax.NewParser(syntax.Variant(syntax.LangBash), syntax.KeepComments(false))
}

// source parses src as a shell program and classifies everything in it.
func (c *classifier) source(src string) {
	if c.depth > maxNesting {
		c.add(RiskDangerous, "nested-shell", "shell commands nested too deeply to analyse")
		return
	}
	f, err := newParser().Parse(strings.NewReader(src), "")
	if err != nil {
		c.add(RiskDangerous, "unparseable", "could not parse command: "+err.Error())
		return
	}
	c.walk(f)
}

// nested classifies a string that a command hands to a shell (sh -c, eval,
// trap, …). The inner shell starts in the outer shell's directory and its
// own cd does not leak out.
func (c *classifier) nested(src string) {
	c.nestedN += len(src)
	if c.nestedN > maxNestedBytes {
		c.add(RiskDangerous, "too-complex", "command too complex to analyse")
		return
	}
	saved := c.cwdRisky
	c.depth++
	c.source(src)
	c.depth--
	c.cwdRisky = saved
}

// walk visits every node below n in source order.
func (c *classifier) walk(n syntax.Node) {
	syntax.Walk(n, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Stmt:
			c.stmt(n)
		case *syntax.BinaryCmd:
			if (n.Op == syntax.Pipe || n.Op == syntax.PipeAll) && !c.pipes[n] {
				c.pipeline(n)
			}
		case *syntax.FuncDecl:
			c.funcDecl(n)
		case *syntax.Subshell:
			c.scoped(n.Stmts)
			return false
		case *syntax.CmdSubst:
			c.scoped(n.Stmts)
			return false
		case *syntax.ProcSubst:
			c.scoped(n.Stmts)
			return false
		}
		return true
	})
}

// scoped walks statements that run in a subshell: a cd inside does not
// change the directory of what follows.
func (c *classifier) scoped(stmts []*syntax.Stmt) {
	saved := c.cwdRisky
	for _, s := range stmts {
		c.walk(s)
	}
	c.cwdRisky = saved
}

// stmt classifies one statement: its redirections and, for a simple
// command, the command itself.
func (c *classifier) stmt(s *syntax.Stmt) {
	var stdin *arg
	for _, r := range s.Redirs {
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			a := renderString(r.Hdoc)
			stdin = &a
			c.sqlCheck(a.s)
		case syntax.WordHdoc:
			a := renderString(r.Word)
			stdin = &a
			c.sqlCheck(a.s)
		case syntax.RdrIn, syntax.DplIn:
			// reading is fine
		case syntax.DplOut:
			t := renderString(r.Word)
			if t.s == "-" || isDigits(t.s) {
				continue
			}
			c.writeTarget(t, "redirection")
		default:
			c.writeTarget(renderString(r.Word), "redirection")
		}
	}
	call, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) == 0 {
		return
	}
	c.command(renderArgs(call.Args), cmdCtx{stdin: stdin})
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// funcDecl flags fork bombs: a function that calls itself from a pipeline
// or a background job inside its own body, like :(){ :|:& };:.
func (c *classifier) funcDecl(fd *syntax.FuncDecl) {
	if fd.Name == nil || fd.Body == nil {
		return
	}
	name := fd.Name.Value
	bomb := false
	syntax.Walk(fd.Body, func(n syntax.Node) bool {
		if bomb {
			return false
		}
		switch n := n.(type) {
		case *syntax.Stmt:
			if (n.Background || n.Coprocess || n.Disown) && callsFunc(n, name) {
				bomb = true
			}
		case *syntax.BinaryCmd:
			if (n.Op == syntax.Pipe || n.Op == syntax.PipeAll) && (callsFunc(n.X, name) || callsFunc(n.Y, name)) {
				bomb = true
			}
		}
		return !bomb
	})
	if bomb {
		c.add(RiskHardline, "fork-bomb", fmt.Sprintf("fork bomb (function %s spawns copies of itself)", name))
	}
}

// callsFunc reports whether n contains a simple command named name.
func callsFunc(n syntax.Node, name string) bool {
	found := false
	syntax.Walk(n, func(n syntax.Node) bool {
		if found {
			return false
		}
		if call, ok := n.(*syntax.CallExpr); ok && len(call.Args) > 0 {
			if r := resolve(renderArgs(call.Args[:1])); r.name == name {
				found = true
			}
		}
		return !found
	})
	return found
}

// pipeline classifies what flows between the stages of a | b | c: a
// download piped into an interpreter, or generated text piped into a shell.
func (c *classifier) pipeline(b *syntax.BinaryCmd) {
	var stages []*syntax.Stmt
	c.flattenPipe(b, &stages)
	var download bool
	for i, st := range stages {
		info := stageInfo(st)
		if i > 0 && info.stdinInterp != "" {
			switch {
			case download:
				c.add(RiskDangerous, "curl-pipe-shell",
					fmt.Sprintf("pipes a download into an interpreter (… | %s)", info.stdinInterp))
			case info.stdinShell:
				if src, ok := stageInfo(stages[i-1]).echoSrc(); ok {
					c.nested(src)
				} else {
					c.add(RiskDangerous, "pipe-to-shell",
						fmt.Sprintf("pipes generated commands into a shell (… | %s)", info.stdinInterp))
				}
			}
		}
		download = download || info.download
	}
}

func (c *classifier) flattenPipe(b *syntax.BinaryCmd, out *[]*syntax.Stmt) {
	c.pipes[b] = true
	for _, s := range []*syntax.Stmt{b.X, b.Y} {
		if inner, ok := s.Cmd.(*syntax.BinaryCmd); ok && (inner.Op == syntax.Pipe || inner.Op == syntax.PipeAll) && len(s.Redirs) == 0 {
			c.flattenPipe(inner, out)
			continue
		}
		*out = append(*out, s)
	}
}

type stage struct {
	download    bool   // runs a downloader (curl, wget, …)
	stdinInterp string // name of an interpreter that reads its program from stdin
	stdinShell  bool   // that interpreter is a shell
	echo        []arg  // args of a lone echo/printf, if that is the whole stage
	echoName    string // "echo" or "printf"
}

// stageInfo looks at every simple command inside one pipeline stage.
func stageInfo(s *syntax.Stmt) stage {
	var st stage
	if call, ok := s.Cmd.(*syntax.CallExpr); ok && len(call.Args) > 0 {
		r := resolve(renderArgs(call.Args))
		if r.name == "echo" || r.name == "printf" {
			st.echoName, st.echo = r.name, r.args
		}
	}
	syntax.Walk(s, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		r := resolve(renderArgs(call.Args))
		if downloaders[r.name] {
			st.download = true
		}
		if st.stdinInterp == "" && readsProgramFromStdin(r.name, r.args) {
			st.stdinInterp = r.name
			st.stdinShell = shells[r.name]
		}
		return true
	})
	return st
}

// echoSrc returns the text a lone echo/printf with static arguments prints.
func (st stage) echoSrc() (string, bool) {
	if st.echoName == "" {
		return "", false
	}
	args := st.echo
	for _, a := range args {
		if a.dyn {
			return "", false
		}
	}
	if st.echoName == "printf" {
		if len(args) != 1 || strings.Contains(args[0].s, "%") {
			return "", false
		}
		return decodeEcho(args[0].s), true
	}
	escapes := false
	for len(args) > 0 && isEchoFlag(args[0].s) {
		escapes = escapes || strings.Contains(args[0].s, "e")
		args = args[1:]
	}
	src := joinArgs(args)
	if escapes {
		src = decodeEcho(src)
	}
	return src, true
}

func isEchoFlag(s string) bool {
	if len(s) < 2 || s[0] != '-' {
		return false
	}
	return strings.Trim(s[1:], "neE") == ""
}
