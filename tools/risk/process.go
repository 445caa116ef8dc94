package risk

import (
	"fmt"
	"strings"
)

func (c *classifier) kill(args []arg, cx cmdCtx) {
	if cx.xargs {
		c.add(RiskDangerous, KeyKillOther, "signals the processes named by its input (xargs kill)")
	}
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
		a := args[i]
		if a.dyn && !c.ownJob(a) {
			c.add(RiskDangerous, KeyKillOther, fmt.Sprintf("signals a process named at run time, which it may not have started (kill %s)", a.s))
			continue
		}
		switch a.s {
		case "-1":
			c.add(RiskDangerous, KeyKillAll, "signals every process you may signal (kill -1)")
		case "1":
			c.add(RiskDangerous, KeyKillAll, "signals init (kill 1)")
		}
	}
}

func init() {
	register(func(c *classifier, _ string, args []arg, cx cmdCtx) { c.kill(args, cx) }, "kill")
	register(func(c *classifier, name string, _ []arg, _ cmdCtx) {
		c.add(RiskDangerous, KeyPkill, fmt.Sprintf("kills processes by name (%s)", name))
	}, "pkill", "killall", "killall5")
}

// ownJob reports whether a kill operand names a job the command itself
// started: $! or $$ (or -$$, its process group), a variable assigned from
// $! earlier in the command, or a job spec (%1).
func (c *classifier) ownJob(a arg) bool {
	s := strings.TrimPrefix(a.s, "-")
	switch {
	case s == "$!" || s == "$$" || strings.HasPrefix(s, "%"):
		return true
	case strings.HasPrefix(s, "$") && c.jobVars[s[1:]]:
		return true
	case s == substPlaceholder && a.word != nil:
		// $(jobs -p): the background jobs of this shell.
		own := false
		walkCalls(a.word, func(args []arg) {
			own = len(args) > 1 && args[0].s == "jobs" && strings.HasPrefix(args[1].s, "-") && strings.Contains(args[1].s, "p")
		})
		return own
	}
	return false
}
