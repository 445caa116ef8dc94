package risk

import (
	"fmt"
	"strings"
)

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

func init() {
	register(func(c *classifier, _ string, args []arg, _ cmdCtx) { c.kill(args) }, "kill")
	register(func(c *classifier, name string, _ []arg, _ cmdCtx) {
		c.add(RiskDangerous, "pkill", fmt.Sprintf("kills processes by name (%s)", name))
	}, "pkill", "killall", "killall5")
}
