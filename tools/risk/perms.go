package risk

import (
	"fmt"
	"strconv"
	"strings"
)

func (c *classifier) chmod(args []arg) {
	var recursive, ref bool
	ops := flagScan(args, func(o, _ string, _ bool) bool {
		recursive = recursive || longMatch(o, "recursive", 3)
		ref = ref || longMatch(o, "reference", 3)
		return false
	}, func(a arg) bool {
		if strings.Trim(a.s[1:], "Rcfv") != "" {
			return false // a mode such as -w
		}
		recursive = recursive || strings.ContainsRune(a.s, 'R')
		return true
	})
	mode, targets := "", ops
	if !ref && len(ops) > 0 {
		mode, targets = ops[0].s, ops[1:]
	}
	if recursive {
		for _, t := range targets {
			if c.criticalAny(t, false) {
				c.add(RiskHardline, KeyChmodRoot, fmt.Sprintf("recursive permission change of the root or a system directory (chmod -R %s)", t.s))
			}
		}
	}
	c.permsProtected("chmod", targets)
	if worldWritable(mode) {
		c.add(RiskDangerous, KeyChmodWorldWritable, fmt.Sprintf("makes files world-writable (chmod %s)", mode))
	}
	if recursive {
		c.add(RiskDangerous, KeyChmodRecursive, "recursive permission change (chmod -R)")
	}
}

// worldWritable reports whether a chmod mode grants write to others.
func worldWritable(mode string) bool {
	if mode == "" {
		return false
	}
	if v, err := strconv.ParseUint(mode, 8, 32); err == nil {
		return v&0o002 != 0
	}
	for _, clause := range strings.Split(mode, ",") {
		i := 0
		for i < len(clause) && strings.IndexByte("ugoa", clause[i]) >= 0 {
			i++
		}
		who := clause[:i]
		for i < len(clause) {
			op := clause[i]
			if op != '+' && op != '-' && op != '=' {
				break
			}
			i++
			j := i
			for j < len(clause) && strings.IndexByte("rwxXstugo", clause[j]) >= 0 {
				j++
			}
			perms := clause[i:j]
			i = j
			if op != '-' && strings.ContainsRune(perms, 'w') && (who == "" || strings.ContainsAny(who, "ao")) {
				return true
			}
		}
	}
	return false
}

func (c *classifier) chown(name string, args []arg) {
	var recursive, ref bool
	ops := flagScan(args, func(o, _ string, _ bool) bool {
		recursive = recursive || longMatch(o, "recursive", 3)
		ref = ref || longMatch(o, "reference", 3)
		return longMatch(o, "from", 2)
	}, func(a arg) bool {
		recursive = recursive || strings.ContainsRune(a.s, 'R')
		return true
	})
	targets := ops
	if !ref && len(ops) > 0 {
		targets = ops[1:]
	}
	c.permsProtected(name, targets)
	if !recursive {
		return
	}
	for _, t := range targets {
		if c.criticalAny(t, false) {
			c.add(RiskHardline, KeyChownRoot, fmt.Sprintf("recursive ownership change of the root or a system directory (%s -R %s)", name, t.s))
		}
	}
	c.add(RiskDangerous, KeyChownRecursive, fmt.Sprintf("recursive ownership change (%s -R)", name))
}

func init() {
	register(func(c *classifier, _ string, args []arg, _ cmdCtx) { c.chmod(args) }, "chmod")
	register(func(c *classifier, name string, args []arg, _ cmdCtx) { c.chown(name, args) }, "chown", "chgrp")
}

// permsProtected flags a permission or ownership change of the home
// directory, a file or directory under one of its dot-directories
// (~/.ssh, ~/.config), or a top-level system directory.
func (c *classifier) permsProtected(name string, targets []arg) {
	for _, t := range targets {
		a, ok := c.abs(t.s)
		if ok && (a == homeDir || strings.HasPrefix(a, homeDir+"/.")) || c.criticalAny(t, true) {
			c.add(RiskDangerous, KeyPermsHome, fmt.Sprintf("changes permissions or ownership of the home, its dot-files or a system directory (%s %s)", name, t.s))
			return
		}
	}
}
