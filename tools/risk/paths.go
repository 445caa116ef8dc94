package risk

import (
	"fmt"
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// deleteTarget classifies one path that a command deletes recursively
// (rm -r, find -delete): the root, a home or a system directory is
// hardline, and so is a path that is one of those when its run-time
// expansions come out empty (/$x, "$dir"/*, ${x:-/}). A directory above
// the working directory is delete-ancestor. It reports whether the path
// is computed at run time.
func (c *classifier) deleteTarget(t arg, via string) (dynamic bool) {
	cands := []string{t.s}
	if t.dyn && !onlyHome(t.word) {
		dynamic = true
		cands = append(cands, c.minimal(t.word)...)
	}
	for _, p := range cands {
		if c.critical(p, true) {
			c.add(RiskHardline, KeyRmRoot, fmt.Sprintf("recursive delete of a root, home or system directory (%s %s)", via, t.s))
			return dynamic
		}
	}
	if _, ok := c.abs(t.s); !ok {
		return true // relative to a directory computed at run time
	}
	for _, p := range cands {
		a, _ := c.abs(p)
		up, contents := climb(a)
		switch {
		case up >= 3 && contents:
			c.add(RiskHardline, KeyDeleteAncestor,
				fmt.Sprintf("recursive delete of a directory %d levels above the working directory (%s %s)", up, via, t.s))
		case up >= 1 && contents:
			c.add(RiskDangerous, KeyDeleteAncestor,
				fmt.Sprintf("recursive delete of the working directory's parent (%s %s)", via, t.s))
		case up >= 3:
			c.add(RiskDangerous, KeyDeleteAncestor,
				fmt.Sprintf("recursive delete %d levels above the working directory (%s %s)", up, via, t.s))
		}
	}
	return dynamic
}

// climb looks at a cleaned path relative to the starting directory: how
// many levels it climbs (leading ".."), and whether it names that
// ancestor itself or all its contents (.., ../*, ../../.*).
func climb(p string) (up int, contents bool) {
	for p == ".." || strings.HasPrefix(p, "../") {
		up++
		p = strings.TrimPrefix(strings.TrimPrefix(p, ".."), "/")
	}
	return up, p == "" || p == "*" || p == ".*"
}

// onlyHome reports whether the only run-time expansion in w is $HOME or
// ${HOME}, which the classifier treats as known.
func onlyHome(w *syntax.Word) bool {
	if w == nil {
		return false
	}
	ok := true
	syntax.Walk(w, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.ParamExp:
			if n.Param == nil || n.Param.Value != "HOME" || !simpleParam(n) {
				ok = false
			}
			return false
		case *syntax.CmdSubst, *syntax.ArithmExp, *syntax.ProcSubst, *syntax.ExtGlob:
			ok = false
			return false
		}
		return ok
	})
	return ok
}

// homeDir stands for the user's home directory in the paths the
// classifier resolves: /home/NAME has the shape of a home directory.
const homeDir = "/home/~"

// cwdState is what the classifier knows of one working directory.
type cwdState struct {
	// dir is a cleaned path: absolute ("/etc", homeDir+"/.ssh"), relative
	// to the directory the command starts in ("..", "src"), or "" for
	// that starting directory.
	dir string
	// dyn is set when the directory is computed at run time ("cd $x"): the
	// place of relative paths is unknown.
	dyn bool
	// risky is set, with dyn, when that directory could be the root or a
	// home directory (cd ${x:-/}, cd "$x/"), so that "rm -rf *" there is
	// treated as a wipe.
	risky bool
}

// shellDir is the working directory of the shell being classified, the
// previous one (for cd -) and pushd's stack.
type shellDir struct {
	cwd, prev cwdState
	stack     []cwdState
}

// maxDirStack bounds pushd's stack, maxDirLen the working directory
// followed through cd (longer is treated as unknown).
const (
	maxDirStack = 16
	maxDirLen   = 512
)

// abs resolves path p against the working directory: an absolute path
// (with ~ and $HOME as homeDir), or a path relative to the starting
// directory. ok is false when p is relative to a directory computed at
// run time.
func (c *classifier) abs(p string) (string, bool) {
	if p == "" {
		return "", true
	}
	if rest, ok := homeRelative(p); ok {
		return path.Clean(homeDir + "/" + rest), true
	}
	if p[0] == '/' {
		return path.Clean(p), true
	}
	cwd := c.dir.cwd
	if cwd.dyn {
		return "", false
	}
	if cwd.dir == "" {
		return path.Clean(p), true
	}
	return path.Clean(cwd.dir + "/" + p), true
}

// cd follows cd, pushd and popd.
func (c *classifier) cd(name string, args []arg) {
	d := &c.dir
	_, ops := parseAll(args, optSpec{})
	if name == "popd" {
		if n := len(d.stack); n > 0 {
			d.prev, d.cwd = d.cwd, d.stack[n-1]
			d.stack = d.stack[: n-1 : n-1] // a later push copies: saved states keep theirs
		}
		return
	}
	var next cwdState
	switch {
	case len(ops) == 0 && name == "pushd":
		if n := len(d.stack); n > 0 {
			top := d.stack[n-1]
			d.stack = append(d.stack[:n-1:n-1], d.cwd)
			d.prev, d.cwd = d.cwd, top
		}
		return
	case len(ops) == 0:
		next = cwdState{dir: homeDir} // cd alone goes home
	case ops[0].s == "-" && !ops[0].dyn:
		next = d.prev
	case ops[0].dyn:
		next = cwdState{dyn: true}
		for _, p := range minimalRenderings(ops[0].word) {
			if p != "" && c.critical(p, true) {
				next.risky = true
			}
		}
	default:
		p := ops[0].s
		if a, ok := c.abs(p); ok {
			next = cwdState{dir: a}
		} else {
			// Relative to an unknown directory: climbing out of it may reach
			// the root or home.
			next = cwdState{dyn: true, risky: d.cwd.risky && (p == ".." || strings.HasPrefix(p, "../"))}
		}
	}
	if len(next.dir) > maxDirLen {
		next = cwdState{dyn: true} // bounded work: a very deep directory is unknown
	}
	if name == "pushd" && len(d.stack) < maxDirStack {
		d.stack = append(d.stack[:len(d.stack):len(d.stack)], d.cwd)
	}
	d.prev, d.cwd = d.cwd, next
}

// criticalAny is critical for a path as written or, when it is computed
// at run time, as it reads when its expansions come out empty (/$x).
func (c *classifier) criticalAny(t arg, homes bool) bool {
	if c.critical(t.s, homes) {
		return true
	}
	if t.dyn {
		for _, p := range c.minimal(t.word) {
			if c.critical(p, homes) {
				return true
			}
		}
	}
	return false
}

// minimal is minimalRenderings for w, remembered for the last word: brace
// expansion makes several arguments of one word, which come in a row and
// must not each redo the work (nor be checked again).
func (c *classifier) minimal(w *syntax.Word) []string {
	if w == nil {
		return nil
	}
	if w == c.minWord {
		return nil // its renderings were checked with the previous argument
	}
	c.minWord = w
	return minimalRenderings(w)
}

// critical reports whether deleting (or recursively changing) path p
// would wipe the root, a home directory (when homes is set) or a
// top-level system directory, given the working directory.
func (c *classifier) critical(p string, homes bool) bool {
	a, ok := c.abs(p)
	if !ok {
		if !c.dir.cwd.risky {
			return false
		}
		switch path.Clean(p) {
		case ".", "*", ".*", "..", "../*":
			return true
		}
		return false
	}
	if a == "" || a[0] != '/' {
		return false
	}
	a = strings.TrimSuffix(a, "/*")
	a = strings.TrimSuffix(a, "/.*")
	if a == "" || a == "/" {
		return true
	}
	parts := strings.Split(a[1:], "/")
	switch len(parts) {
	case 1:
		return systemDirs[parts[0]] || hasGlob(parts[0])
	case 2:
		return systemSubdirs[a[1:]] || homes && (parts[0] == "home" || parts[0] == "Users") ||
			systemDirs[parts[0]] && hasGlob(parts[1])
	}
	return false
}

// homeRelative splits ~, ~user, $HOME and ${HOME} (rendered as $HOME)
// off a path and returns the rest.
func homeRelative(p string) (string, bool) {
	switch {
	case p == "~" || p == "$HOME":
		return "", true
	case strings.HasPrefix(p, "$HOME/"):
		return p[len("$HOME/"):], true
	case strings.HasPrefix(p, "~"):
		user, rest, _ := strings.Cut(p[1:], "/")
		if strings.ContainsAny(user, "$*?[") || user == "+" || user == "-" {
			return "", false
		}
		return rest, true
	}
	return "", false
}

func hasGlob(s string) bool { return strings.ContainsAny(s, "*?[") }

// writeTarget classifies a file that a command writes to. Relative paths
// are resolved against the working directory (cd ~/.ssh && echo k >>
// authorized_keys).
func (c *classifier) writeTarget(t arg, via string) {
	p := t.s
	if p == "" {
		return
	}
	norm := c.writePath(p)
	if strings.HasPrefix(norm, "/dev/tcp/") || strings.HasPrefix(norm, "/dev/udp/") {
		c.add(RiskDangerous, KeyNetworkUpload, fmt.Sprintf("sends data off the machine through %s (%s)", norm, via))
		return
	}
	if strings.HasPrefix(norm, "/dev/") {
		clean := path.Clean(norm)
		switch {
		case safeDevices[clean] || strings.HasPrefix(clean, "/dev/fd/") || strings.HasPrefix(clean, "/dev/pts/") || strings.HasPrefix(clean, "/dev/shm/"):
		case blockDevices.MatchString(clean):
			c.add(RiskHardline, KeyBlockDeviceWrite, fmt.Sprintf("writes to block device %s (%s)", clean, via))
		default:
			c.add(RiskDangerous, KeyDeviceWrite, fmt.Sprintf("writes to device %s (%s)", clean, via))
		}
		return
	}
	if strings.HasPrefix(norm, "/proc/") || strings.HasPrefix(norm, "/sys/") {
		if clean := path.Clean(norm); clean == "/proc/sysrq-trigger" {
			c.add(RiskHardline, KeySysrq, fmt.Sprintf("writes to %s, which can reboot or crash the machine (%s)", clean, via))
		} else {
			c.add(RiskDangerous, KeyKernelWrite, fmt.Sprintf("changes kernel settings (%s %s)", via, clean))
		}
		return
	}
	c.noteWritten(p)
	switch {
	case strings.HasPrefix(norm, "/etc/") || norm == "/etc" || strings.HasPrefix(norm, "/private/etc/"):
		c.add(RiskDangerous, KeyWriteEtc, fmt.Sprintf("writes into /etc (%s %s)", via, p))
	case hasComponent(norm, ".ssh"):
		c.add(RiskDangerous, KeyWriteSSH, fmt.Sprintf("writes into ~/.ssh (%s %s)", via, p))
	case strings.HasSuffix(norm, ".gitconfig") || strings.HasSuffix(norm, ".git/config") || strings.Contains(norm, ".git/hooks/") ||
		strings.HasSuffix(norm, ".config/git/config") || strings.HasSuffix(norm, ".git/hooks"):
		c.add(RiskDangerous, KeyWriteGitConfig, fmt.Sprintf("writes git configuration or hooks, which can run commands (%s %s)", via, p))
	case rcFiles[norm[strings.LastIndexByte(norm, '/')+1:]]:
		c.add(RiskDangerous, KeyWriteShellRC, fmt.Sprintf("writes to a shell startup file (%s %s)", via, p))
	case persistent(norm):
		c.add(RiskDangerous, KeyWritePersistence, fmt.Sprintf("writes where later logins or services run things (%s %s)", via, p))
	}
}

// persistenceDirs are directories, relative to the home, whose contents
// run later: user services, autostart entries, programs on $PATH.
var persistenceDirs = []string{".config/systemd", ".local/share/systemd", ".config/autostart", ".local/bin", "bin",
	".config/environment.d", "Library/LaunchAgents", ".config/upstart", ".xinitrc", ".xprofile", ".xsession", ".pam_environment"}

// systemWriteDirs are system directories whose contents run or configure
// the machine.
var systemWriteDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/boot", "/var/spool/cron",
	"/Library/LaunchAgents", "/Library/LaunchDaemons", "/opt"}

// persistent reports whether a resolved path is inside a persistence or
// system directory.
func persistent(norm string) bool {
	if rest, ok := strings.CutPrefix(norm, homeDir+"/"); ok {
		for _, d := range persistenceDirs {
			if rest == d || strings.HasPrefix(rest, d+"/") {
				return true
			}
		}
		return false
	}
	for _, d := range systemWriteDirs {
		if norm == d || strings.HasPrefix(norm, d+"/") {
			return true
		}
	}
	return false
}

// unpackInto flags a command that unpacks or patches files into dir: the
// home directory itself, a dot-directory of it, the root or a system
// directory, or a directory computed at run time (which may be any of
// those). Below the working directory, the files land in the workspace.
func (c *classifier) unpackInto(dir arg, via string) {
	c.treeWritten = true
	p := strings.TrimRight(dir.s, "/")
	if p == "" && dir.s != "" {
		p = "/"
	}
	a, ok := c.abs(p)
	switch {
	case dir.dyn && !onlyHome(dir.word) && !strings.HasPrefix(dir.s, "$PWD"):
		c.add(RiskDangerous, KeyUnpackHome, fmt.Sprintf("unpacks files into a directory computed at run time (%s %s)", via, dir.s))
	case ok && (a == homeDir || strings.HasPrefix(a, homeDir+"/.") || a == "/" || c.critical(p, true)):
		c.add(RiskDangerous, KeyUnpackHome, fmt.Sprintf("unpacks files into the home or a system directory (%s %s)", via, dir.s))
	}
	c.writeTarget(arg{s: p + "/"}, via)
}

// writePath is the path that writeTarget judges for p: resolved against
// the working directory when that can matter (an absolute or home path, a
// working directory outside the start or below a .ssh or a .git), p itself
// otherwise, which spares the work on long relative paths.
func (c *classifier) writePath(p string) string {
	cwd := c.dir.cwd
	if p == "" || cwd.dyn && p[0] != '/' && p[0] != '~' && !strings.HasPrefix(p, "$HOME") {
		return p
	}
	if p[0] == '/' || p[0] == '~' || strings.HasPrefix(p, "$HOME") || strings.HasPrefix(cwd.dir, "/") || strings.Contains(cwd.dir, ".ssh") ||
		strings.Contains(cwd.dir, ".git") {
		a, _ := c.abs(p)
		return a
	}
	return p
}

// emptied flags a command that destroys the contents of file t (": > f",
// "cp /dev/null f"). Devices are left to writeTarget.
func (c *classifier) emptied(t arg, what string) {
	norm := c.writePath(t.s)
	if t.s == "" || strings.HasPrefix(norm, "/dev/") || strings.HasPrefix(norm, "/proc/") || strings.HasPrefix(norm, "/sys/") {
		return
	}
	c.add(RiskDangerous, KeyTruncate, fmt.Sprintf("destroys file contents (%s)", what))
}

// outsideCwd reports whether path p is outside the starting directory:
// absolute, in a home directory, climbing out with "..", or relative to a
// directory computed at run time.
func (c *classifier) outsideCwd(p string) bool {
	if p == "" {
		return false
	}
	a, ok := c.abs(p)
	return !ok || a != "" && (a[0] == '/' || a == ".." || strings.HasPrefix(a, "../"))
}

func init() {
	register(func(c *classifier, name string, args []arg, _ cmdCtx) { c.cd(name, args) }, "cd", "pushd", "popd")
	register(func(c *classifier, _ string, args []arg, _ cmdCtx) {
		_, ops := parseAll(args, optSpec{longArg: []string{"output-error"}})
		for _, t := range ops {
			c.writeTarget(t, "tee")
		}
	}, "tee")
	register(func(c *classifier, name string, args []arg, _ cmdCtx) { c.copyDest(name, args) }, "cp", "mv", "ln", "install")
	register(func(c *classifier, name string, args []arg, _ cmdCtx) {
		_, ops := parseAll(args, optSpec{shortArg: "srn", longArg: []string{"size", "reference", "iterations", "random-source"}})
		for _, t := range ops {
			c.writeTarget(t, name)
		}
		k := KeyTruncate
		if name == "shred" {
			k = KeyShred
		}
		c.add(RiskDangerous, k, fmt.Sprintf("destroys file contents (%s)", name))
	}, "truncate", "shred")
	register(patch, "patch")
	register(func(c *classifier, name string, args []arg, _ cmdCtx) {
		o, _ := parseAll(args, optSpec{shortArg: "kotTS", longArg: []string{"key", "output", "field-separator", "temporary-directory",
			"buffer-size", "parallel", "batch-size", "files0-from", "compress-program", "random-source", "sort"}})
		c.optTargets(name, o, "o", "--output")
		if p, ok := o.get("--compress-program"); ok {
			c.execOption(p, "sort --compress-program", compressors)
		}
	}, "sort")
	register(func(c *classifier, name string, args []arg, _ cmdCtx) {
		// uniq [OPTION]… [INPUT [OUTPUT]]
		if _, ops := parseAll(args, optSpec{shortArg: "fsw", longArg: []string{"skip-fields", "skip-chars", "check-chars"}}); len(ops) > 1 {
			c.writeTarget(ops[1], name)
		}
	}, "uniq")
	register(sshKeygen, "ssh-keygen")
}

// patch writes the file it is given (patch FILE, -o OUT) or, without one,
// the files the patch names, below -d DIR (or the working directory).
func patch(c *classifier, name string, args []arg, cx cmdCtx) {
	o, ops := parseAll(args, optSpec{shortArg: "BbDdFiopVYzrgx", longArg: []string{"prefix", "basename-prefix", "ifdef",
		"directory", "fuzz", "input", "output", "strip", "version-control", "suffix", "reject-file", "get", "debug", "quoting-style", "read-only"}})
	if out, ok := o.get("o", "--output"); ok {
		c.writeTarget(arg{s: out}, name)
	} else if len(ops) > 0 {
		c.writeTarget(ops[0], name)
	}
	if d, ok := o.get("d", "--directory"); ok {
		c.unpackInto(arg{s: d}, name+" -d")
	}
}

// sshKeygen writes the key pair named by -f when it generates or changes
// keys (not when it lists, prints or looks them up).
func sshKeygen(c *classifier, name string, args []arg, _ cmdCtx) {
	o, _ := parseAll(args, optSpec{shortArg: "abCDEfFIJjKmMNnOPrSstVwYzZ"})
	if f, ok := o.get("f"); ok && !o.has("l", "y", "F", "R", "H", "L", "K", "Q", "B", "D") {
		c.writeTarget(arg{s: f}, name+" -f")
	}
}
