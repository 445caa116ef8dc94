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
	c.setuidMode("chmod", mode)
	if locksOwnerOut(mode) {
		for _, t := range targets {
			if c.outsideCwd(t.s) {
				c.add(RiskDangerous, KeyPermsLockout, fmt.Sprintf("takes every permission from a path outside the working directory (chmod %s %s)", mode, t.s))
				break
			}
		}
	}
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
	writable := false
	eachClause(mode, func(who string, op byte, perms string) {
		if op != '-' && strings.ContainsRune(perms, 'w') && (who == "" || strings.ContainsAny(who, "ao")) {
			writable = true
		}
	})
	return writable
}

// setuidMode flags a mode that sets the setuid or setgid bit: octal with
// 04000 or 02000, or a symbolic clause that adds s (u+s, g+s, +s, u=rwxs).
func (c *classifier) setuidMode(via, mode string) {
	if modeSetsID(mode) {
		c.add(RiskDangerous, KeyChmodSetuid, fmt.Sprintf("sets the setuid or setgid bit, so that the file runs as its owner or group (%s %s)", via, mode))
	}
}

func modeSetsID(mode string) bool {
	if mode == "" {
		return false
	}
	if v, err := strconv.ParseUint(mode, 8, 32); err == nil {
		return v&0o6000 != 0
	}
	found := false
	eachClause(mode, func(who string, op byte, perms string) {
		if op != '-' && strings.ContainsRune(perms, 's') && (who == "" || strings.ContainsAny(who, "uga")) {
			found = true
		}
	})
	return found
}

// locksOwnerOut reports whether mode leaves the owner no permission at
// all: octal with no owner bits (000, 0, 044), or a symbolic clause that
// takes r, w and x from the owner (a-rwx, u-rwx, -rwx) or sets the
// owner's to nothing (=, u=, a=).
func locksOwnerOut(mode string) bool {
	if mode == "" {
		return false
	}
	if v, err := strconv.ParseUint(mode, 8, 32); err == nil {
		return v&0o700 == 0
	}
	locked := false
	eachClause(mode, func(who string, op byte, perms string) {
		owner := who == "" || strings.ContainsAny(who, "ua")
		switch {
		case !owner:
		case op == '-' && strings.ContainsRune(perms, 'r') && strings.ContainsRune(perms, 'w') && strings.ContainsAny(perms, "xX"):
			locked = true
		case op == '=' && !strings.ContainsAny(perms, "rwxXugo"):
			locked = true
		case op == '+' || op == '=':
			locked = false // a later clause gives some back
		}
	})
	return locked
}

// eachClause calls f for every action of a symbolic mode (u+x,go-w has
// two clauses; g+w-x has two actions).
func eachClause(mode string, f func(who string, op byte, perms string)) {
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
			f(who, op, clause[i:j])
			i = j
		}
	}
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
