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
		c.add(RiskDangerous, KeyUserService, fmt.Sprintf("has the host run a command outside this command and its sandbox (%s)", name))
		if _, rest, _ := parseOpts(args, optSpec{}); len(rest) > 0 {
			c.command(rest, cmdCtx{})
		}
	}, "host-spawn", "distrobox-host-exec")
	register(func(c *classifier, name string, args []arg, _ cmdCtx) {
		if len(args) == 1 && (args[0].s == "-V" || args[0].s == "--version" || args[0].s == "-h" || args[0].s == "--help") {
			return
		}
		c.add(RiskDangerous, KeyUserService, fmt.Sprintf("talks to the user's %s server, which runs commands outside this command", name))
		for i, a := range args {
			if a.s == "--" && i+1 < len(args) {
				c.command(args[i+1:], cmdCtx{})
				break
			}
		}
	}, "zellij", "gnome-terminal")
	register(func(c *classifier, name string, args []arg, _ cmdCtx) {
		c.tmux("tmux", args) // byobu runs tmux (or screen) with its arguments
	}, "byobu", "byobu-tmux")
	register(func(c *classifier, name string, args []arg, _ cmdCtx) {
		if len(args) > 0 && !strings.HasPrefix(args[0].s, "-") {
			c.add(RiskDangerous, KeyUserService, fmt.Sprintf("drives the user's desktop, outside this command (%s %s)", name, args[0].s))
		}
	}, "xdotool", "ydotool", "xdg-open", "gio", "kde-open", "kde-open5", "gnome-open", "wlrctl")
	register(func(c *classifier, name string, args []arg, _ cmdCtx) {
		if len(args) > 0 && args[0].s == "cli" {
			c.add(RiskDangerous, KeyUserService, fmt.Sprintf("remote-controls the terminal, which runs commands outside this command (%s cli)", name))
		}
	}, "wezterm")
}

// editorRemote flags vim's and nvim's client-server options (--remote-send,
// --remote-expr, --server with a remote option): the editor that receives
// them runs the keys or expression outside this command.
//
// Every emacsclient but --version talks to the running Emacs.
func (c *classifier) editorRemote(name string, args []arg) {
	if name == "emacsclient" {
		if len(args) != 1 || args[0].s != "--version" && args[0].s != "-V" && args[0].s != "--help" && args[0].s != "-H" {
			c.add(RiskDangerous, KeyUserService, "talks to the running Emacs, which runs what it is sent outside this command (emacsclient)")
		}
		return
	}
	for _, a := range args {
		if strings.HasPrefix(a.s, "--remote") {
			c.add(RiskDangerous, KeyUserService, fmt.Sprintf("sends keys or expressions to a running editor (%s %s)", name, a.s))
			return
		}
	}
}
