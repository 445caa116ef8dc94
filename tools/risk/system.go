package risk

import (
	"fmt"
	"path"
	"strings"
)

func (c *classifier) dd(args []arg, cx cmdCtx) {
	c.ddSize(args)
	input, notrunc := cx.stdin != nil || cx.stdinFile != nil || cx.piped, false
	for _, a := range args {
		input = input || strings.HasPrefix(a.s, "if=")
		notrunc = notrunc || strings.HasPrefix(a.s, "conv=") && strings.Contains(a.s, "notrunc")
	}
	for _, a := range args {
		out, ok := strings.CutPrefix(a.s, "of=")
		if !ok {
			continue
		}
		clean := path.Clean(out)
		switch {
		case !strings.HasPrefix(out, "/dev/"):
			c.writeTarget(arg{s: out}, "dd")
			if !input && !notrunc {
				// dd reads the command's standard input, which is empty.
				c.emptied(arg{s: out}, "dd of="+out+" with no input")
			}
		case safeDevices[clean] || strings.HasPrefix(clean, "/dev/fd/") || strings.HasPrefix(clean, "/dev/shm/"):
		case blockDevices.MatchString(clean):
			c.add(RiskHardline, KeyDDBlockDevice, fmt.Sprintf("dd writes to block device %s", clean))
		default:
			c.add(RiskDangerous, KeyDDDevice, fmt.Sprintf("dd writes to device %s", clean))
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
	c.add(RiskDangerous, KeyScheduledCommand, fmt.Sprintf("schedules commands to run later, outside this session (%s)", name))
	if o, _ := parseAll(args, optSpec{shortArg: "qfmMt"}); o.has("f") {
		c.noteRan(o["f"])
	} else if cx.stdin != nil {
		c.nested(cx.stdin.s)
	}
}

func init() {
	register(func(c *classifier, _ string, args []arg, cx cmdCtx) { c.dd(args, cx) }, "dd")
	mkfs := func(c *classifier, name string, _ []arg, _ cmdCtx) {
		c.add(RiskHardline, KeyMkfs, fmt.Sprintf("creates a filesystem, destroying the device's data (%s)", name))
	}
	register(mkfs, keys(mkfsLike)...)
	prefixed["mkfs"] = mkfs
	register(func(c *classifier, name string, args []arg, _ cmdCtx) {
		if o, _ := parseAll(args, optSpec{}); !o.has("l", "--list") || name == "wipefs" || name == "blkdiscard" {
			c.add(RiskDangerous, KeyDiskPartition, fmt.Sprintf("rewrites disk partitions or signatures (%s)", name))
		}
	}, keys(diskTools)...)
	register(func(c *classifier, name string, _ []arg, _ cmdCtx) {
		c.add(RiskHardline, KeyShutdown, fmt.Sprintf("shuts down or reboots the machine (%s)", name))
	}, keys(shutdowns)...)
	register(func(c *classifier, name string, args []arg, _ cmdCtx) {
		if _, ops := parseAll(args, optSpec{}); len(ops) > 0 && (ops[0].s == "0" || ops[0].s == "6") {
			c.add(RiskHardline, KeyShutdown, fmt.Sprintf("shuts down or reboots the machine (%s %s)", name, ops[0].s))
		}
	}, "init", "telinit")
	register(func(c *classifier, _ string, args []arg, _ cmdCtx) {
		o, ops := parseAll(args, optSpec{shortArg: "u"})
		switch {
		case o.has("r", "--remove"):
			c.add(RiskDangerous, KeyCrontabRemove, "removes the crontab (crontab -r)")
		case o.has("-") || len(ops) > 0:
			c.add(RiskDangerous, KeyCrontabReplace, "replaces the crontab (crontab FILE)")
		}
	}, "crontab")
	register(func(c *classifier, name string, args []arg, cx cmdCtx) { c.at(name, args, cx) }, "at", "batch")
}
