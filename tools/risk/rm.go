package risk

import (
	"fmt"
	"strings"
)

func (c *classifier) rm(args []arg, cx cmdCtx) {
	var recursive, force, noPreserve, computed bool
	var targets []arg
	end := false
	for _, a := range args {
		s := a.s
		switch {
		case end:
			targets = append(targets, a)
		case a.dynStart:
			computed = true // may expand to -rf
			targets = append(targets, a)
		case s == "--":
			end = true
		case strings.HasPrefix(s, "--"):
			o, _, _ := strings.Cut(s[2:], "=")
			recursive = recursive || longMatch(o, "recursive", 1)
			force = force || longMatch(o, "force", 1)
			noPreserve = noPreserve || longMatch(o, "no-preserve-root", 1)
		case len(s) > 1 && s[0] == '-':
			if a.dyn {
				computed = true
			}
			recursive = recursive || strings.ContainsAny(s[1:], "rR")
			force = force || strings.ContainsRune(s[1:], 'f')
		default:
			targets = append(targets, a)
		}
	}
	// dynamic: some target is computed at run time, so that no approval
	// given to a literal "rm -rf build" may cover it.
	dynamic, dynText := cx.xargs, "xargs rm -r"
	if recursive {
		if noPreserve {
			c.add(RiskHardline, "rm-root", "recursive delete with --no-preserve-root")
		}
		for _, t := range targets {
			if c.deleteTarget(t, "rm -r") && !dynamic {
				dynamic, dynText = true, "rm -r "+t.s
			}
		}
	}
	switch {
	case recursive && dynamic:
		c.add(RiskDangerous, "rm-recursive-dynamic", fmt.Sprintf("recursive delete of a path computed at run time (%s)", dynText))
	case recursive && force:
		c.add(RiskDangerous, "rm-recursive", "recursive forced delete (rm -rf)")
	case recursive:
		c.add(RiskDangerous, "rm-recursive", "recursive delete (rm -r)")
	case computed:
		c.add(RiskDangerous, "rm-computed-args", "rm with options computed at run time")
		if force {
			c.add(RiskDangerous, "rm-force", "forced delete (rm -f)")
		}
	case force:
		c.add(RiskDangerous, "rm-force", "forced delete (rm -f)")
	}
}

func (c *classifier) find(args []arg) {
	i := 0
	for i < len(args) {
		s := args[i].s
		if s == "-H" || s == "-L" || s == "-P" || strings.HasPrefix(s, "-O") {
			i++
			continue
		}
		if s == "-D" {
			i += 2
			continue
		}
		break
	}
	var paths []arg
	for ; i < len(args); i++ {
		s := args[i].s
		if strings.HasPrefix(s, "-") || s == "(" || s == "!" || s == ")" || s == "," {
			break
		}
		paths = append(paths, args[i])
	}
	del := false
	for ; i < len(args); i++ {
		switch args[i].s {
		case "-delete":
			del = true
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(args) && args[j].s != ";" && args[j].s != "+" {
				j++
			}
			inner := args[i+1 : j]
			if len(inner) > 0 {
				switch resolve(inner).name {
				case "rm", "unlink", "shred":
					del = true
				}
				c.command(inner, cmdCtx{})
			}
			i = j
		}
	}
	if !del {
		return
	}
	if len(paths) == 0 && c.critical(".", true) {
		c.add(RiskHardline, "find-root-delete", "find deleting from a root, home or system directory")
	}
	for _, p := range paths {
		if c.criticalAny(p, true) {
			c.add(RiskHardline, "find-root-delete", fmt.Sprintf("find deleting from a root, home or system directory (find %s -delete)", p.s))
		}
	}
	c.add(RiskDangerous, "find-delete", "deletes the files find matches (find -delete / -exec rm)")
}

func init() {
	register(func(c *classifier, _ string, args []arg, cx cmdCtx) { c.rm(args, cx) }, "rm")
	register(func(c *classifier, _ string, args []arg, _ cmdCtx) { c.find(args) }, "find")
}
