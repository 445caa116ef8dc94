package risk

import (
	"fmt"
	"path"
	"strings"
)

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

// atListing reports whether at's arguments only list, show or remove jobs.
func atListing(args []arg) bool {
	o, _ := parseAll(args, optSpec{shortArg: "qfmMt"})
	return o.has("l", "c", "r", "d", "V")
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

// sessionctlControl are the sessionctl verbs that answer prompts or change
// what runs: a model must not run them on its own daemon unasked.
var sessionctlControl = map[string]bool{"approve": true, "answer": true, "resolve": true, "cancel": true,
	"interrupt": true, "send": true, "attach": true}

func init() {
	register(func(c *classifier, _ string, args []arg, _ cmdCtx) { c.dd(args) }, "dd")
	mkfs := func(c *classifier, name string, _ []arg, _ cmdCtx) {
		c.add(RiskHardline, "mkfs", fmt.Sprintf("creates a filesystem, destroying the device's data (%s)", name))
	}
	register(mkfs, keys(mkfsLike)...)
	prefixed["mkfs"] = mkfs
	register(func(c *classifier, name string, args []arg, _ cmdCtx) {
		if o, _ := parseAll(args, optSpec{}); !o.has("l", "--list") || name == "wipefs" || name == "blkdiscard" {
			c.add(RiskDangerous, "disk-partition", fmt.Sprintf("rewrites disk partitions or signatures (%s)", name))
		}
	}, keys(diskTools)...)
	register(func(c *classifier, name string, _ []arg, _ cmdCtx) {
		c.add(RiskHardline, "shutdown", fmt.Sprintf("shuts down or reboots the machine (%s)", name))
	}, keys(shutdowns)...)
	register(func(c *classifier, name string, args []arg, _ cmdCtx) {
		if _, ops := parseAll(args, optSpec{}); len(ops) > 0 && (ops[0].s == "0" || ops[0].s == "6") {
			c.add(RiskHardline, "shutdown", fmt.Sprintf("shuts down or reboots the machine (%s %s)", name, ops[0].s))
		}
	}, "init", "telinit")
	register(func(c *classifier, name string, args []arg, _ cmdCtx) {
		_, ops := parseAll(args, optSpec{shortArg: "HMtpsnoP", longArg: []string{"host", "machine", "type", "property", "signal", "lines", "output", "state", "kill-whom", "root", "job-mode", "when", "message"}})
		if len(ops) > 0 {
			switch ops[0].s {
			case "poweroff", "reboot", "halt", "kexec", "soft-reboot":
				c.add(RiskHardline, "shutdown", fmt.Sprintf("shuts down or reboots the machine (%s %s)", name, ops[0].s))
			}
		}
	}, "systemctl", "loginctl")
	register(func(c *classifier, _ string, args []arg, _ cmdCtx) {
		// A command that answers or steers the daemon's own sessions would
		// let the model approve its own gated commands: only a person may.
		_, ops := parseAll(args, optSpec{longArg: []string{"home", "timeout", "choice", "generation", "cwd", "title", "model", "input-id"}})
		if len(ops) > 0 && sessionctlControl[ops[0].s] {
			c.add(RiskDangerous, "sessiond-control", fmt.Sprintf("answers or steers sessiond's sessions (sessionctl %s): only a person may", ops[0].s))
		}
	}, "sessionctl")
	register(func(c *classifier, _ string, args []arg, _ cmdCtx) {
		o, ops := parseAll(args, optSpec{shortArg: "u"})
		switch {
		case o.has("r", "--remove"):
			c.add(RiskDangerous, "crontab-remove", "removes the crontab (crontab -r)")
		case o.has("-") || len(ops) > 0:
			c.add(RiskDangerous, "crontab-replace", "replaces the crontab (crontab FILE)")
		}
	}, "crontab")
	register(func(c *classifier, name string, args []arg, cx cmdCtx) { c.at(name, args, cx) }, "at", "batch")
}
