package risk

import (
	"fmt"
	"path"
	"strings"
)

// The daemon's own CLI and home. A command that answers the daemon's
// prompts (sessionctl approve) would let the model approve its own gated
// commands, and one that reads the daemon's home would find its token
// (daemon.json) and could do the same over the wire: only a person may.

// sessionctlControl are the sessionctl verbs that answer prompts or change
// what runs: a model must not run them on its own daemon unasked.
var sessionctlControl = set("approve", "answer", "resolve", "cancel", "interrupt", "send", "attach")

// daemonCLIs are the daemon's programs that answer its prompts, which a
// command must not copy or rename (cp $(which sessionctl) x && ./x
// approve …). The daemon itself (sessiond) answers none.
var daemonCLIs = set("sessionctl")

// copiers are commands that copy, link or rename a file named in their
// arguments.
var copiers = set("cp", "ln", "mv", "install", "rsync", "cat", "dd", "tee", "tar", "zip", "cpio", "base64", "xxd", "gzip", "link")

// defaultHomeMarks are spellings of sessiond's default homes.
var defaultHomeMarks = []string{"SESSIOND_HOME", ".local/state/sessiond", "XDG_STATE_HOME/sessiond"}

func init() {
	register(sessionctl, "sessionctl")
}

// sessionctl flags the verbs that answer or steer sessions, and verbs it
// cannot see (computed at run time, or read by xargs).
func sessionctl(c *classifier, _ string, args []arg, cx cmdCtx) {
	_, ops := parseAll(args, optSpec{longArg: []string{"home", "timeout", "choice", "generation", "cwd", "title", "model", "input-id"}})
	switch {
	case cx.xargs && len(ops) == 0:
		c.add(RiskDangerous, KeySessiondControl, "sessionctl verb read from its input (xargs sessionctl): only a person may answer sessiond's prompts")
	case len(ops) == 0:
	case ops[0].dyn:
		c.add(RiskDangerous, KeySessiondControl, fmt.Sprintf("sessionctl verb computed at run time (sessionctl %s): only a person may answer sessiond's prompts", ops[0].s))
	case sessionctlControl[ops[0].s]:
		c.add(RiskDangerous, KeySessiondControl, fmt.Sprintf("answers or steers sessiond's sessions (sessionctl %s): only a person may", ops[0].s))
	}
}

// daemonFiles looks at every word of a command: one that names a path
// inside a protected directory (the daemon's home) is dangerous, and so is
// copying or renaming the daemon's CLI.
func (c *classifier) daemonFiles(name string, words []arg) {
	for _, a := range words {
		c.protectedPath(a)
		if copiers[name] && mentionsDaemonCLI(a) {
			c.add(RiskDangerous, KeySessiondControl, fmt.Sprintf("copies or renames sessiond's CLI (%s %s): only a person may answer its prompts", name, a.s))
		}
	}
}

// defaultHome is sessiond's default home as the classifier spells paths.
const defaultHome = homeDir + "/.local/state/sessiond"

// protectedPath flags a word naming a path inside a protected directory:
// the word itself, or the value of an option or assignment (--f=PATH),
// resolved against the working directory that cd has reached.
func (c *classifier) protectedPath(a arg) {
	s := a.s
	if s == "" {
		return
	}
	for _, m := range defaultHomeMarks {
		if strings.Contains(s, m) {
			c.add(RiskDangerous, KeySessiondHome, fmt.Sprintf("touches sessiond's home, which holds its token and state (%s)", s))
			return
		}
	}
	if !strings.ContainsAny(s, "/~$") && !strings.HasPrefix(c.dir.cwd.dir, "/") && c.startDir == "" {
		return // relative to the starting directory, which is the workspace
	}
	cands := []string{s}
	if _, v, ok := strings.Cut(s, "="); ok {
		cands = append(cands, v)
	}
	for _, p := range cands {
		abs, ok := c.abs(p)
		if ok && abs != "" && abs[0] != '/' && c.startDir != "" {
			abs = path.Join(c.startDir, abs) // relative to the session's cwd
		}
		if !ok || abs == "" || abs[0] != '/' {
			continue
		}
		if c.insideProtected(abs, hasGlob(p)) {
			c.add(RiskDangerous, KeySessiondHome, fmt.Sprintf("touches sessiond's home, which holds its token and state (%s)", s))
			return
		}
	}
}

// insideProtected reports whether abs is a protected directory or inside
// one; a glob is inside when its components match those of a protected
// directory (~/.local/state/*/daemon.json).
func (c *classifier) insideProtected(abs string, glob bool) bool {
	for _, dir := range c.protected {
		if abs == dir || strings.HasPrefix(abs, dir+"/") || glob && globReaches(abs, dir) {
			return true
		}
	}
	return false
}

// globReaches reports whether the glob pattern p, as a path, matches dir
// or a path inside it, component by component.
func globReaches(p, dir string) bool {
	pc, dc := strings.Split(p, "/"), strings.Split(dir, "/")
	if len(pc) < len(dc) {
		return false
	}
	for i := range dc {
		if ok, _ := path.Match(pc[i], dc[i]); !ok {
			return false
		}
	}
	return true
}

// mentionsDaemonCLI reports whether a word names the daemon's CLI: its
// base name, or a command substitution that looks it up (which sessionctl).
func mentionsDaemonCLI(a arg) bool {
	if daemonCLIs[fileBase(a.s)] {
		return true
	}
	if a.word == nil || !a.dyn {
		return false
	}
	found := false
	walkCalls(a.word, func(args []arg) {
		for _, x := range args {
			if daemonCLIs[fileBase(x.s)] {
				found = true
			}
		}
	})
	return found
}

// aliasesDaemonCLI flags an alias or variable that names the daemon's CLI
// (alias sc=sessionctl), which hides its verbs from later words.
func (c *classifier) aliasesDaemonCLI(name, value string) {
	if f := strings.Fields(value); len(f) > 0 && daemonCLIs[fileBase(f[0])] {
		c.add(RiskDangerous, KeySessiondControl, fmt.Sprintf("gives sessiond's CLI another name (%s=%s): only a person may answer its prompts", name, value))
	}
}
