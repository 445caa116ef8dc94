package risk

import "strings"

// Pagers and manual readers that run commands: less +!cmd runs cmd when
// less starts (and +|m cmd pipes to one), man -P (--pager) names the
// program that shows the page. Both are analysed as commands given in an
// option ([classifier.execOption]).

func init() {
	register(func(c *classifier, name string, args []arg, _ cmdCtx) {
		for _, a := range args {
			cmd, ok := strings.CutPrefix(a.s, "+")
			if !ok {
				continue
			}
			cmd = strings.TrimPrefix(cmd, "+") // ++cmd: for every file
			switch {
			case strings.HasPrefix(cmd, "!"):
				c.execOption(strings.TrimPrefix(cmd[1:], "!"), name+" +!", nil)
			case strings.HasPrefix(cmd, "|") && len(cmd) > 2:
				c.execOption(cmd[2:], name+" +|", nil)
			}
		}
	}, "less")
	register(func(c *classifier, name string, args []arg, _ cmdCtx) {
		for i := 0; i < len(args); i++ {
			s := args[i].s
			var pager string
			switch {
			case s == "-P" || s == "--pager":
				if i+1 >= len(args) {
					continue
				}
				i++
				pager = args[i].s
			case strings.HasPrefix(s, "--pager="):
				pager = s[len("--pager="):]
			case strings.HasPrefix(s, "-P") && !strings.HasPrefix(s, "--"):
				pager = s[2:]
			case strings.HasPrefix(s, "-H") && len(s) > 2 && !strings.HasPrefix(s, "--"):
				pager = s[2:] // -Hbrowser
			case strings.HasPrefix(s, "--html="):
				pager = s[len("--html="):]
			default:
				continue
			}
			c.execOption(pager, name+" -P "+pager, pagerCmds)
		}
	}, "man")
}
