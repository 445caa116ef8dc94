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

// daemonCLIs are the daemon's programs, which a command must not copy or
// rename (cp $(which sessionctl) x && ./x approve …).
var daemonCLIs = set("sessionctl", "sessiond")

// copiers are commands that copy, link or rename a file named in their
// arguments.
var copiers = set("cp", "ln", "mv", "install", "rsync", "cat", "dd", "tee", "tar", "zip", "cpio", "base64", "xxd", "gzip", "link")

// defaultHomeMarks are spellings of sessiond's default homes.
var defaultHomeMarks = []string{"SESSIOND_HOME", ".local/state/sessiond", "XDG_STATE_HOME/sessiond"}

func init() {
	register(sessionctl, "sessionctl")
}

// sessionctl flags the verbs that answer or steer sessions.
func sessionctl(c *classifier, _ string, args []arg, _ cmdCtx) {
	_, ops := parseAll(args, optSpec{longArg: []string{"home", "timeout", "choice", "generation", "cwd", "title", "model", "input-id"}})
	switch {
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

// protectedPath flags a word naming a path inside a protected directory:
// the word itself, or the value of an option or assignment (--f=PATH).
func (c *classifier) protectedPath(a arg) {
	s := a.s
	if len(s) < 2 {
		return
	}
	for _, m := range defaultHomeMarks {
		if strings.Contains(s, m) {
			c.add(RiskDangerous, KeySessiondHome, fmt.Sprintf("touches sessiond's home, which holds its token and state (%s)", s))
			return
		}
	}
	if len(c.protected) == 0 || !strings.ContainsAny(s, "/~$") {
		return
	}
	cands := []string{s}
	if _, v, ok := strings.Cut(s, "="); ok {
		cands = append(cands, v)
	}
	for _, p := range cands {
		abs, ok := c.abs(p)
		if !ok || abs == "" || abs[0] != '/' {
			continue
		}
		for _, dir := range c.protected {
			if abs == dir || strings.HasPrefix(abs, dir+"/") || strings.HasPrefix(dir, path.Clean(strings.TrimSuffix(abs, "*"))+"/") && hasGlob(p) {
				c.add(RiskDangerous, KeySessiondHome, fmt.Sprintf("touches sessiond's home, which holds its token and state (%s)", s))
				return
			}
		}
	}
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
