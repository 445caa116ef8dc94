package risk

import (
	"fmt"
	"mvdan.cc/sh/v3/syntax"
	"strings"
)

func (c *classifier) rm(args []arg, cx cmdCtx) {
	var recursive, force, noPreserve, computed, interactive bool
	targets := flagScan(args, func(o, val string, _ bool) bool {
		recursive = recursive || longMatch(o, "recursive", 1)
		force = force || longMatch(o, "force", 1)
		noPreserve = noPreserve || longMatch(o, "no-preserve-root", 1)
		interactive = interactive || longMatch(o, "interactive", 3) && val != "never"
		return false
	}, func(a arg) bool {
		computed = computed || a.dyn
		recursive = recursive || strings.ContainsAny(a.s[1:], "rR")
		force = force || strings.ContainsRune(a.s[1:], 'f')
		interactive = interactive || strings.ContainsRune(a.s[1:], 'i')
		return true
	})
	for _, t := range targets {
		computed = computed || t.dynStart // may expand to -rf
	}
	// dynamic: some target is computed at run time, so that no approval
	// given to a literal "rm -rf build" may cover it.
	dynamic, dynText := cx.xargs, "xargs rm -r"
	if recursive {
		if noPreserve {
			c.add(RiskHardline, KeyRmRoot, "recursive delete with --no-preserve-root")
		}
		for _, t := range targets {
			if c.deleteTarget(t, "rm -r") && !dynamic {
				dynamic, dynText = true, "rm -r "+t.s
			}
		}
	}
	switch {
	case recursive && dynamic:
		c.add(RiskDangerous, KeyRmRecursiveDynamic, fmt.Sprintf("recursive delete of a path computed at run time (%s)", dynText))
	case recursive && force:
		c.add(RiskDangerous, KeyRmRecursive, "recursive forced delete (rm -rf)")
	case recursive:
		c.add(RiskDangerous, KeyRmRecursive, "recursive delete (rm -r)")
	case computed:
		c.add(RiskDangerous, KeyRmComputedArgs, "rm with options computed at run time")
		if force {
			c.add(RiskDangerous, KeyRmForce, "forced delete (rm -f)")
		}
	case force:
		c.add(RiskDangerous, KeyRmForce, "forced delete (rm -f)")
	}
	if !recursive && (!interactive || force) {
		// rm -i asks for each file, and the terminal's input is closed.
		for _, t := range targets {
			if globbed(t.word) {
				c.add(RiskDangerous, KeyRmGlob, fmt.Sprintf("deletes every file a glob matches (rm %s)", t.s))
				break
			}
		}
	}
}

// globbed reports whether an unquoted part of w holds a glob (*, ?, […]),
// so that the word may stand for many files.
func globbed(w *syntax.Word) bool {
	if w == nil {
		return false
	}
	for _, p := range w.Parts {
		if l, ok := p.(*syntax.Lit); ok && strings.ContainsAny(l.Value, "*?[") {
			return true
		}
		if _, ok := p.(*syntax.ExtGlob); ok {
			return true
		}
	}
	return false
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
		case "-fprint", "-fprint0", "-fls", "-fprintf":
			if i+1 < len(args) {
				c.writeTarget(args[i+1], "find "+args[i].s)
			}
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(args) && args[j].s != ";" && args[j].s != "+" {
				j++
			}
			inner := args[i+1 : j]
			if len(inner) > 0 {
				switch n := resolve(inner).name; n {
				case "rm", "unlink", "shred":
					del = true
				case "chmod":
					c.add(RiskDangerous, KeyChmodRecursive, "changes the permissions of every file find matches (find -exec chmod)")
				case "chown", "chgrp":
					c.add(RiskDangerous, KeyChownRecursive, fmt.Sprintf("changes the ownership of every file find matches (find -exec %s)", n))
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
		c.add(RiskHardline, KeyFindRootDelete, "find deleting from a root, home or system directory")
	}
	for _, p := range paths {
		if c.criticalAny(p, true) {
			c.add(RiskHardline, KeyFindRootDelete, fmt.Sprintf("find deleting from a root, home or system directory (find %s -delete)", p.s))
		}
	}
	c.add(RiskDangerous, KeyFindDelete, "deletes the files find matches (find -delete / -exec rm)")
}

func init() {
	register(func(c *classifier, _ string, args []arg, cx cmdCtx) { c.rm(args, cx) }, "rm")
	register(func(c *classifier, _ string, args []arg, _ cmdCtx) { c.find(args) }, "find")
}
