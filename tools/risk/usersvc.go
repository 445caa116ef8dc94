package risk

import (
	"fmt"
	"strings"
)

// Clients of the user's own services: a bus, a terminal multiplexer, an
// editor or a terminal that runs what it is asked, as the user and outside
// this command and its sandbox (tmux and screen are in interp.go, docker
// -H in infra.go, curl --unix-socket in network.go).

// busReadOnly are the busctl and gdbus verbs that only look.
var busReadOnly = set("list", "status", "monitor", "capture", "tree", "introspect", "get-property", "help", "--help", "-h", "--version", "wait")

func init() {
	register(func(c *classifier, name string, args []arg, _ cmdCtx) {
		c.add(RiskDangerous, KeyUserService, fmt.Sprintf("sends a message on a D-Bus bus, whose services may start programs (%s)", name))
	}, "dbus-send", "qdbus", "qdbus6", "dbus")
	register(func(c *classifier, name string, args []arg, _ cmdCtx) {
		_, ops := parseAll(args, optSpec{shortArg: "HMdeo", longArg: []string{"host", "machine", "address", "dest", "object-path", "method", "timeout", "match"}})
		if len(ops) == 0 || busReadOnly[ops[0].s] {
			return
		}
		c.add(RiskDangerous, KeyUserService, fmt.Sprintf("calls a D-Bus service, which may start programs (%s %s)", name, ops[0].s))
	}, "busctl", "gdbus")
	register(func(c *classifier, name string, args []arg, _ cmdCtx) {
		for _, a := range args {
			if a.s == "@" || strings.HasPrefix(a.s, "+kitten") && len(args) > 1 {
				c.add(RiskDangerous, KeyUserService, fmt.Sprintf("remote-controls the terminal, which runs commands outside this command (%s @)", name))
				return
			}
		}
	}, "kitty")
	register(func(c *classifier, name string, args []arg, _ cmdCtx) {
		if len(args) > 0 && args[0].s == "cli" {
			c.add(RiskDangerous, KeyUserService, fmt.Sprintf("remote-controls the terminal, which runs commands outside this command (%s cli)", name))
		}
	}, "wezterm")
}

// editorRemote flags vim's and nvim's client-server options (--remote-send,
// --remote-expr, --server with a remote option): the editor that receives
// them runs the keys or expression outside this command.
func (c *classifier) editorRemote(name string, args []arg) {
	for _, a := range args {
		if strings.HasPrefix(a.s, "--remote") {
			c.add(RiskDangerous, KeyUserService, fmt.Sprintf("sends keys or expressions to a running editor (%s %s)", name, a.s))
			return
		}
	}
}
