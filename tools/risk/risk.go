package risk

import (
	"fmt"
	"path"
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
	// writes to ~/.ssh or shell rc files, DROP TABLE, sudo, inline
	// interpreter code (python -c), commands hidden in options (sed e, tar
	// --to-command, git -c core.pager=…), scripts written and run by the
	// same command whose text cannot be seen, setuid bits, clients of
	// the user's own services (tmux, D-Bus), unparseable input, command
	// names computed at run time, ….
	RiskDangerous Risk = "dangerous"
	// RiskHardline commands are never run, whatever the approval mode:
	// rm -rf /, rm -rf /$x or "$x"/* (the root when $x is empty), mkfs,
	// fork bombs, dd or redirection to a block device, shutdown/reboot,
	// find / -delete, chmod -R / chown -R of /, rm -rf ../../.., ….
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
	// Rules are the rules of the worst risk that matched, each with its
	// own reason, in the order they were found; nil when Risk is safe.
	// Their keys are those of Pattern; [Lookup] gives each rule's entry in
	// the policy.
	Rules []Match `json:"rules,omitempty"`
}

// Match is one rule that matched a command.
type Match struct {
	// Key is the rule's key, an entry of [Rules].
	Key Key `json:"key"`
	// Reason says why, for people, naming what matched ("recursive forced
	// delete (rm -rf)").
	Reason string `json:"reason"`
}

// Classify parses command as bash (mvdan.cc/sh/v3/syntax) and returns the
// worst risk across every simple command it contains: pipelines, lists
// (&&, ||, ;), subshells, blocks, command and process substitutions,
// function bodies, here-documents fed to a shell, commands behind wrappers
// (sudo, doas, env, xargs, nice, nohup, timeout, command, exec, time,
// stdbuf, ionice, setsid, watch, flock, busybox, chrt, strace, ltrace,
// unshare, nsenter, taskset, numactl, prlimit, firejail, proot, fakeroot,
// flatpak-spawn, runuser, systemd-run, poetry run, bundle exec, … — see
// the wrappers table) and the strings passed to sh/bash/zsh/dash -c,
// eval, trap, su -c, alias, ssh -o ProxyCommand, git aliases and
// command-valued git settings, sed's e command, tar --to-command and the
// like, which are parsed again (up to a fixed nesting depth).
//
// It follows cd, pushd and popd through a list, so that relative paths
// are judged where they point (cd ~/.ssh && echo k >> authorized_keys,
// cd / && rm -rf *), and remembers the files the command writes, so that
// a shell script written and then run by the same command is rated as
// its text when a literal wrote it whole (echo … > s.sh && sh s.sh) and
// is dangerous when its text cannot be seen. A recursive delete whose
// target is computed at run time is judged as it reads when the
// expansions come out empty (rm -rf /$x and "$d"/* are hardline) and gets
// its own rule key, so that approving "rm -rf build" never approves
// "rm -rf $x".
//
// Input that does not parse is dangerous (reason "could not parse command:
// …"), never safe, and so is a command whose name is computed at run time
// ($x args, $(echo rm) -rf). Classify never panics: an internal failure is
// reported as dangerous. It is safe for concurrent use.
//
// Classification is static and best effort: it does not know the starting
// directory, the values of variables, or the contents of scripts and
// files the command runs (python3 script.py is safe unless the same
// command wrote script.py), nor what runs inside containers (docker run,
// kubectl exec). Code it cannot look into — inline interpreter code
// (python -c, perl -e, node -e, awk programs that call system() or pipe
// to commands), commands given in options, scripts written by the same
// command whose text it cannot see — is dangerous.
//
// The rules it reports, with their keys, risks, documentation and
// examples, are the table [Rules] (docs/risk-rules.md is generated from
// it). Rules marked Unanalysable name no particular action but say the
// command could not be analysed; callers should not remember "session" or
// "always" approvals for them by key ([Unanalysable]).
//
// Classify knows no paths of the caller's: it protects the default home
// of sessiond (~/.local/state/sessiond, $SESSIOND_HOME). [ClassifyWith]
// takes a [Context] naming more protected paths.
func Classify(command string) Classification {
	return ClassifyWith(command, Context{})
}

// Context is what the caller knows that the command string does not say.
// The zero Context is what [Classify] uses.
type Context struct {
	// ProtectedPaths are directories that a command may neither read nor
	// write without approval, such as the daemon's home (its token and
	// its database): any argument or redirection naming a path inside one
	// (as written, or after ~ and $HOME) is dangerous (rule
	// sessiond-home). Relative entries are ignored. The default homes of
	// sessiond (~/.local/state/sessiond, $SESSIOND_HOME,
	// $XDG_STATE_HOME/sessiond) are always protected.
	ProtectedPaths []string
	// Home is the home directory of the user the commands run as ($HOME),
	// so that ~ and $HOME in commands reach the protected paths below it.
	// Empty: ~ is a home of unknown place.
	Home string
	// Cwd is the absolute directory the command starts in (the session's
	// cwd), so that relative paths into a protected directory lying in it
	// (make run's ./.home) or around it count as its absolute spelling.
	// Empty: relative paths are taken to stay in the workspace.
	Cwd string
	// WrittenInTurn, when set, reports whether a file that the command
	// runs as code (sh s.sh, ./s.sh, python3 p.py, the Makefile of make),
	// named as the command names it (relative to the session's cwd, or
	// absolute), was written since the turn began, by an earlier command
	// that no person saw: running it is script-written, its text never
	// shown. The agent answers it from the file system; nil: nothing is
	// known of earlier commands.
	WrittenInTurn func(path string) bool
}

// ClassifyWith is [Classify] with a [Context]. It never panics: an
// internal failure is reported as dangerous (rule internal-error).
func ClassifyWith(command string, cx Context) (c Classification) {
	defer func() {
		if r := recover(); r != nil {
			reason := fmt.Sprintf("could not classify command: %v", r)
			c = Classification{Risk: RiskDangerous, Pattern: string(KeyInternalError), Reason: reason,
				Rules: []Match{{Key: KeyInternalError, Reason: reason}}}
		}
	}()
	return classify(command, cx)
}

// classify is ClassifyWith without the panic guard, for the fuzz test.
func classify(command string, cx Context) Classification {
	c := &classifier{seen: map[Key]int{}, pipes: map[*syntax.BinaryCmd]bool{}, piped: map[*syntax.Stmt]bool{},
		texts: map[string]string{}, writes: map[string]int{}, protected: []string{defaultHome}}
	if path.IsAbs(cx.Cwd) {
		c.startDir = path.Clean(cx.Cwd)
	}
	home := path.Clean(cx.Home)
	for _, p := range cx.ProtectedPaths {
		if !path.IsAbs(p) || path.Clean(p) == "/" {
			continue
		}
		p = path.Clean(p)
		c.protected = append(c.protected, p)
		if rest, ok := strings.CutPrefix(p, home+"/"); ok && path.IsAbs(home) && home != "/" {
			c.protected = append(c.protected, homeDir+"/"+rest) // as ~/rest reads
		}
	}
	c.source(command)
	c.scriptsWritten()
	c.scriptsWrittenInTurn(cx.WrittenInTurn)
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
	risk   Risk
	key    Key
	reason string
}

type classifier struct {
	// protected are the protected directories: sessiond's default home
	// and the caller's (Context), cleaned.
	protected []string
	findings  []finding
	seen      map[Key]int // rule key -> index in findings
	depth     int
	nestedN   int // bytes parsed again so far, bounded by maxNestedBytes
	// dir is where cd, pushd and popd have taken the shell, so that later
	// relative paths can be judged ("cd / && rm -rf *", "cd ~/.ssh && echo
	// k >> authorized_keys", "cd .. && cd .. && rm -rf *").
	dir   shellDir
	pipes map[*syntax.BinaryCmd]bool // pipelines already analysed as part of a larger one
	// piped are the statements that read a pipe (every stage of a
	// pipeline but the first).
	piped map[*syntax.Stmt]bool
	// written and ran are files the command line writes and files it runs
	// as programs or scripts (python3 s.py, make -f m), by base name; a
	// file in both is a script written and run by the same command.
	written, ran []string
	// shellRan are the files it runs as shell scripts (sh s.sh, . s.sh,
	// sh < s.sh, ./s.sh), with what was known of their text then; texts
	// are the texts written whole from a literal (echo … > s.sh, cat >
	// s.sh <<'EOF'), by base name, and writes counts every write of a
	// base name, so that a file written twice has no known text.
	shellRan []shellRun
	texts    map[string]string
	writes   map[string]int
	// scriptLevel is how many written scripts deep the text being
	// classified is.
	scriptLevel int
	// treeWritten is set once the command wrote files it does not name
	// (an archive unpacked, a tree copied): a script run after it may be
	// one of them, whose text cannot be seen.
	treeWritten bool
	// jobVars are variables assigned from $! (pid=$!), which name a job
	// the command started.
	jobVars map[string]bool
	// git remembers what git commands earlier in the line changed.
	gitState gitState
	// startDir is Context.Cwd, cleaned (empty when unknown).
	startDir string
	// ranPaths are the files it runs as code as it names them (not only
	// their base names), for Context.WrittenInTurn.
	ranPaths []string
	// ranDynamic is set when the command runs a file named at run time
	// (sh "$(echo s.sh)"), which may be one it wrote.
	ranDynamic bool
	// minWord is the last word whose minimal renderings were checked.
	minWord *syntax.Word
}

// scriptsWritten flags a file that the command line both writes and runs.
// Files are compared by base name, which errs on the side of a match.
//
// A shell script that the command wrote whole from a literal before
// running it is rated as its text: the text is classified as the commands
// it holds, in the directory it ran in. One whose text cannot be seen
// (computed, appended to, copied, downloaded, written twice or after it
// ran, a #! line naming another interpreter) is script-written.
func (c *classifier) scriptsWritten() {
	if c.ranDynamic && len(c.written) > 0 {
		c.add(RiskDangerous, KeyScriptWritten, fmt.Sprintf("runs a file named at run time after writing %s", c.written[0]))
		return
	}
	for i := 0; i < len(c.shellRan); i++ { // the texts may run scripts too
		run := c.shellRan[i]
		if run.afterTree {
			c.add(RiskDangerous, KeyScriptWritten, fmt.Sprintf("runs a script after unpacking or copying files it cannot see (%s)", run.base))
			continue
		}
		if c.writes[run.base] == 0 {
			continue // not written by this command
		}
		if !run.known || c.writes[run.base] != 1 || run.exec && !shellShebang(run.text) {
			c.add(RiskDangerous, KeyScriptWritten, fmt.Sprintf("runs a script written by the same command whose text cannot be seen (%s)", run.base))
			continue
		}
		if run.level >= maxNesting {
			c.add(RiskDangerous, KeyNestedShell, fmt.Sprintf("scripts run scripts too deeply to analyse (%s)", run.base))
			return
		}
		saved, savedLevel := c.dir, c.scriptLevel
		c.dir, c.scriptLevel = run.dir, run.level+1
		c.nested(run.text)
		c.dir, c.scriptLevel = saved, savedLevel
	}
	if len(c.written) == 0 || len(c.ran) == 0 {
		return
	}
	w := make(map[string]bool, len(c.written))
	for _, f := range c.written {
		w[f] = true
	}
	for _, f := range c.ran {
		if w[f] {
			c.add(RiskDangerous, KeyScriptWritten, fmt.Sprintf("runs a script written by the same command (%s)", f))
			return
		}
	}
}

// scriptsWrittenInTurn flags a file the command runs that an earlier
// command of the turn wrote (Context.WrittenInTurn), unless this command
// wrote it itself (scriptsWritten judged that).
func (c *classifier) scriptsWrittenInTurn(written func(string) bool) {
	if written == nil {
		return
	}
	for _, p := range c.ranPaths {
		if c.writes[fileBase(p)] > 0 {
			continue
		}
		if written(path.Clean(p)) {
			c.add(RiskDangerous, KeyScriptWritten, fmt.Sprintf("runs %s, which an earlier command of this turn wrote: its text was never shown", p))
			return
		}
	}
}

// shellRun is a file run as a shell script: its base name, whether it ran
// as a program (./s.sh, which its #! line may hand to another
// interpreter), the directory it ran in, and its text when a literal
// wrote it before it ran.
type shellRun struct {
	base  string
	exec  bool
	dir   shellDir
	text  string
	known bool
	level int // scripts deep it was run (0: by the command itself)
	// afterTree is set when it ran after the command wrote files it does
	// not name (treeWritten).
	afterTree bool
}

// noteWritten and noteRan record a file written or run, by base name.
func (c *classifier) noteWritten(p string) {
	if b := fileBase(p); b != "" && len(c.written) < maxFileNotes {
		c.written = append(c.written, b)
		c.writes[b]++
	}
}

// noteText records the text that one statement wrote whole into file p.
func (c *classifier) noteText(p, text string) {
	if b := fileBase(p); b != "" && c.writes[b] == 1 {
		c.texts[b] = text
	}
}

// noteShellRan records a file run as a shell script (exec: as a program).
func (c *classifier) noteShellRan(p string, exec bool) {
	if strings.Contains(p, "$") {
		c.ranDynamic = true
		return
	}
	b := fileBase(p)
	if b == "" || len(c.shellRan) >= maxFileNotes {
		return
	}
	c.ranPaths = append(c.ranPaths, p)
	text, known := c.texts[b]
	c.shellRan = append(c.shellRan, shellRun{base: b, exec: exec, dir: c.dir, text: text, known: known, level: c.scriptLevel, afterTree: c.treeWritten})
}

// shellShebang reports whether a script run as a program is run by a
// shell: it has no #! line, or one naming a shell (directly or through
// env).
func shellShebang(text string) bool {
	line, ok := strings.CutPrefix(text, "#!")
	if !ok {
		return true
	}
	line, _, _ = strings.Cut(line, "\n")
	f := strings.Fields(line)
	if len(f) > 1 && path.Base(f[0]) == "env" {
		f = f[1:]
		for len(f) > 1 && strings.HasPrefix(f[0], "-") {
			f = f[1:]
		}
	}
	return len(f) > 0 && shells[path.Base(f[0])]
}

func (c *classifier) noteRan(p string) {
	if strings.Contains(p, "$") {
		c.ranDynamic = true
		return
	}
	if b := fileBase(p); b != "" && len(c.ran) < maxFileNotes {
		c.ran = append(c.ran, b)
		c.ranPaths = append(c.ranPaths, p)
	}
}

// maxFileNotes bounds how many written and run files are remembered.
const maxFileNotes = 4096

func fileBase(p string) string {
	p = strings.TrimRight(p, "/")
	if p == "" || p == "." || p == ".." {
		return ""
	}
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[i+1:]
	}
	return p
}

// add records that rule k matched, with risk r (the rule's risk, or
// hardline for the worst spellings of a few rules) and a reason for people.
func (c *classifier) add(r Risk, k Key, reason string) {
	if i, ok := c.seen[k]; ok {
		if r.rank() > c.findings[i].risk.rank() {
			c.findings[i] = finding{r, k, reason}
		}
		return
	}
	c.seen[k] = len(c.findings)
	c.findings = append(c.findings, finding{r, k, reason})
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
	var matches []Match
	for _, f := range c.findings {
		if f.risk == worst {
			patterns = append(patterns, string(f.key))
			reasons = append(reasons, f.reason)
			matches = append(matches, Match{Key: f.key, Reason: f.reason})
		}
	}
	slices.Sort(patterns)
	return Classification{Risk: worst, Pattern: strings.Join(patterns, "+"), Reason: strings.Join(reasons, "; "), Rules: matches}
}

func newParser() *syntax.Parser {
	return syntax.NewParser(syntax.Variant(syntax.LangBash), syntax.KeepComments(false))
}

// source parses src as a shell program and classifies everything in it.
func (c *classifier) source(src string) {
	if c.depth > maxNesting {
		c.add(RiskDangerous, KeyNestedShell, "shell commands nested too deeply to analyse")
		return
	}
	f, err := newParser().Parse(strings.NewReader(src), "")
	if err != nil {
		c.add(RiskDangerous, KeyUnparseable, "could not parse command: "+err.Error())
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
		c.add(RiskDangerous, KeyTooComplex, "command too complex to analyse")
		return
	}
	saved := c.dir
	c.depth++
	c.source(src)
	c.depth--
	c.dir = saved
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
		case *syntax.WhileClause, *syntax.ForClause:
			c.loop(n)
		case *syntax.Assign:
			c.assign(n)
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
	saved := c.dir
	for _, s := range stmts {
		c.walk(s)
	}
	c.dir = saved
}

// stmt classifies one statement: its redirections and, for a simple
// command, the command itself.
func (c *classifier) stmt(s *syntax.Stmt) {
	var stdin, stdinFile *arg
	var truncated []arg // files emptied by > before the command runs
	var outputs []arg   // files the command's output goes to (>, >>, &>)
	for _, r := range s.Redirs {
		if r.Word != nil {
			c.protectedPath(renderString(r.Word))
		}
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			a := renderString(r.Hdoc)
			stdin = &a
			c.sqlCheck(a.s)
		case syntax.WordHdoc:
			a := renderString(r.Word)
			stdin = &a
			c.sqlCheck(a.s)
		case syntax.RdrIn:
			a := renderString(r.Word)
			stdinFile = &a
		case syntax.DplIn:
			// reading is fine
		case syntax.DplOut:
			t := renderString(r.Word)
			if t.s == "-" || isDigits(t.s) {
				continue
			}
			c.writeTarget(t, "redirection")
		case syntax.RdrOut, syntax.RdrClob, syntax.RdrAll:
			t := renderString(r.Word)
			c.writeTarget(t, "redirection")
			truncated = append(truncated, t)
			outputs = append(outputs, t)
		case syntax.AppOut, syntax.AppAll:
			t := renderString(r.Word)
			c.writeTarget(t, "redirection")
			outputs = append(outputs, t)
		default:
			c.writeTarget(renderString(r.Word), "redirection")
		}
	}
	if tc, ok := s.Cmd.(*syntax.TimeClause); ok && tc.Stmt != nil {
		// bash reads "time -o f cmd" as its time keyword timing a command
		// named -o, but /bin/sh may be dash, which runs /usr/bin/time.
		if call, ok := tc.Stmt.Cmd.(*syntax.CallExpr); ok && len(call.Args) > 0 && strings.HasPrefix(call.Args[0].Lit(), "-") && call.Args[0].Lit() != "-p" {
			c.command(append([]arg{{s: "time"}}, renderArgs(call.Args)...), cmdCtx{})
		}
	}
	call, ok := s.Cmd.(*syntax.CallExpr)
	if s.Cmd != nil && (!ok || len(call.Args) > 0) {
		if !ok {
			return
		}
		r := c.command(renderArgs(call.Args), cmdCtx{stdin: stdin, stdinFile: stdinFile, piped: c.piped[s]})
		if text, ok := literalOutput(r, stdin); ok && !c.piped[s] {
			for _, t := range truncated {
				c.noteText(t.s, text)
			}
			if r.name == "tee" {
				for _, t := range teeTargets(r) {
					c.noteText(t.s, text)
				}
			}
		}
		if what, ok := endlessStream(r); ok {
			c.diskFill(what, outputs)
		}
		if !producesNothing(r) {
			return
		}
	}
	// "> f", ": > f", "true > f", "cat /dev/null > f": the file is emptied.
	for _, t := range truncated {
		c.emptied(t, "> "+t.s)
	}
}

// literalOutput returns the text a command prints when it is all in the
// command line: a static echo or printf, or cat or tee given a
// here-document without expansions.
func literalOutput(r resolved, stdin *arg) (string, bool) {
	if r.dynamic {
		return "", false
	}
	switch r.name {
	case "echo", "printf":
		return stage{echoName: r.name, echo: r.args}.echoSrc()
	case "cat", "tee":
		if stdin == nil || stdin.dyn {
			return "", false
		}
		for _, a := range r.args {
			if r.name == "cat" && a.s != "-" || r.name == "tee" && strings.HasPrefix(a.s, "-") {
				return "", false // cat of files; tee -a appends
			}
		}
		return stdin.s, true
	}
	return "", false
}

// teeTargets are the files a tee writes.
func teeTargets(r resolved) []arg {
	_, ops := parseAll(r.args, optSpec{longArg: []string{"output-error"}})
	return ops
}

// diskFill flags an endless stream ([endlessStream]), what, written into
// one of the files outputs.
func (c *classifier) diskFill(what string, outputs []arg) {
	for _, t := range outputs {
		if norm := c.writePath(t.s); t.s != "" && !strings.HasPrefix(norm, "/dev/") && !strings.HasPrefix(norm, "/proc/") {
			c.add(RiskDangerous, KeyDiskFill, fmt.Sprintf("writes an endless stream into a file until the disk is full (%s > %s)", what, t.s))
			return
		}
	}
}

// producesNothing reports whether a command writes nothing to its output,
// so that redirecting it only empties the target (": > f").
func producesNothing(r resolved) bool {
	if r.dynamic {
		return false
	}
	switch r.name {
	case ":", "true", "false":
		return true
	case "cat":
		_, ops := parseAll(r.args, optSpec{})
		for _, o := range ops {
			if o.s != "/dev/null" {
				return false
			}
		}
		return len(ops) > 0
	case "echo":
		return len(r.args) == 1 && r.args[0].s == "-n"
	case "printf":
		return len(r.args) == 1 && r.args[0].s == ""
	}
	return false
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
		c.add(RiskHardline, KeyForkBomb, fmt.Sprintf("fork bomb (function %s spawns copies of itself)", name))
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
	var prev stage
	for i, st := range stages {
		if i > 0 {
			c.piped[st] = true
		}
		info := stageInfo(st)
		if i > 0 && info.stdinInterp != "" {
			switch {
			case download:
				c.add(RiskDangerous, KeyCurlPipeShell,
					fmt.Sprintf("pipes a download into an interpreter (… | %s)", info.stdinInterp))
			case info.stdinShell:
				if src, ok := prev.echoSrc(); ok {
					c.nested(src)
				} else {
					c.add(RiskDangerous, KeyPipeToShell,
						fmt.Sprintf("pipes generated commands into a shell (… | %s)", info.stdinInterp))
				}
			default:
				c.add(RiskDangerous, KeyInlineCode,
					fmt.Sprintf("pipes a program into %s; runs inline interpreter code that cannot be analysed", info.stdinInterp))
			}
		}
		if i > 0 && info.xargs != nil {
			// echo / | xargs rm -rf: the words echoed become arguments.
			if src, ok := prev.echoSrc(); ok {
				words := strings.Fields(src)
				if len(words) > maxBraceExpansions {
					words = words[:maxBraceExpansions]
				}
				args := renderArgs(info.xargs.Args)
				for _, w := range words {
					args = append(args, arg{s: w})
				}
				c.command(args, cmdCtx{xargsKnown: true})
			}
		}
		if i > 0 && prev.endless != "" && len(info.tee) > 0 {
			c.diskFill(prev.endless+" | tee", info.tee)
		}
		if i > 0 && info.netSink != "" {
			c.add(RiskDangerous, KeyNetworkUpload, fmt.Sprintf("pipes local data off the machine (… | %s)", info.netSink))
		}
		if i > 0 && info.sqlClient {
			// echo 'drop table t' | psql: what flows in is SQL.
			c.sqlStage(stages[i-1])
		}
		download = download || info.download
		prev = info
	}
}

// sqlStage scans the words and here-documents of a pipeline stage that
// feeds an SQL client, leniently.
func (c *classifier) sqlStage(s *syntax.Stmt) {
	syntax.Walk(s, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CallExpr:
			for _, a := range renderArgs(n.Args) {
				c.sqlScan(a.s, true)
			}
		case *syntax.Redirect:
			if n.Hdoc != nil {
				c.sqlScan(renderString(n.Hdoc).s, true)
			} else if n.Op == syntax.WordHdoc {
				c.sqlScan(renderString(n.Word).s, true)
			}
		}
		return true
	})
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
	download    bool             // runs a downloader (curl, wget, …)
	stdinInterp string           // name of an interpreter that reads its program from stdin
	stdinShell  bool             // that interpreter is a shell
	echo        []arg            // args of a lone echo/printf, if that is the whole stage
	echoName    string           // "echo" or "printf"
	xargs       *syntax.CallExpr // the stage is a lone command run by xargs
	sqlClient   bool             // runs an SQL client, which reads SQL from stdin
	netSink     string           // runs a network client that sends what it reads (nc, ssh)
	endless     string           // the stage is a lone command writing an endless stream (yes), for the reason
	tee         []arg            // the files a lone tee writes
}

// stageInfo looks at every simple command inside one pipeline stage.
func stageInfo(s *syntax.Stmt) stage {
	var st stage
	if call, ok := s.Cmd.(*syntax.CallExpr); ok && len(call.Args) > 0 {
		r := resolve(renderArgs(call.Args))
		if r.name == "echo" || r.name == "printf" {
			st.echoName, st.echo = r.name, r.args
		}
		if r.xargs {
			st.xargs = call
		}
		st.endless, _ = endlessStream(r)
		if r.name == "tee" && !r.dynamic {
			_, st.tee = parseAll(r.args, optSpec{longArg: []string{"output-error"}})
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
		if st.stdinInterp == "" && (r.name == "at" || r.name == "batch") && !atListing(r.args) {
			st.stdinInterp, st.stdinShell = r.name, true
		}
		if sqlClients[r.name] {
			st.sqlClient = true
		}
		if netcats[r.name] && !netcatLocal(r.args) || r.remote {
			st.netSink = r.name + r.remoteName
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
		if len(args) > 0 && args[0].s == "--" {
			args = args[1:]
		}
		if len(args) == 0 {
			return "", false
		}
		vals := make([]string, len(args)-1)
		for i, a := range args[1:] {
			vals[i] = a.s
		}
		return printfOutput(args[0].s, vals)
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

// printfOutput returns what printf FORMAT ARGS… prints, for formats with
// only %s, %b, %c, %d-like directives and escapes; false otherwise.
func printfOutput(format string, args []string) (string, bool) {
	var b strings.Builder
	for round := 0; round < maxBraceExpansions; round++ {
		used := 0
		lit := 0
		for i := 0; i < len(format); i++ {
			if format[i] != '%' {
				continue
			}
			b.WriteString(decodeEcho(format[lit:i]))
			j := i + 1
			for j < len(format) && strings.IndexByte("-+ #0123456789.", format[j]) >= 0 {
				j++
			}
			if j >= len(format) {
				return "", false
			}
			verb := format[j]
			var v string
			if verb != '%' && used < len(args) {
				v = args[used]
			}
			switch verb {
			case '%':
				b.WriteByte('%')
			case 's', 'd', 'i', 'u', 'x', 'X', 'o', 'f', 'g', 'e', 'q':
				b.WriteString(v)
				used++
			case 'b':
				b.WriteString(decodeEcho(v))
				used++
			case 'c':
				if v != "" {
					b.WriteByte(v[0])
				}
				used++
			default:
				return "", false
			}
			i, lit = j, j+1
		}
		b.WriteString(decodeEcho(format[lit:]))
		if b.Len() > maxBraceBytes {
			return "", false
		}
		args = args[min(used, len(args)):]
		if used == 0 || len(args) == 0 {
			return b.String(), true
		}
	}
	return "", false
}

func isEchoFlag(s string) bool {
	if len(s) < 2 || s[0] != '-' {
		return false
	}
	return strings.Trim(s[1:], "neE") == ""
}
