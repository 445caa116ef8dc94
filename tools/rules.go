package tools

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// cmdCtx is what a simple command's statement tells about it.
type cmdCtx struct {
	stdin *arg // here-document or here-string fed to it, if any
	xargs bool // runs under xargs
}

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

var (
	shells      = set("sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "posh", "fish", "rbash", "ksh93", "pdksh", "tcsh", "csh")
	downloaders = set("curl", "wget", "fetch", "http", "https", "xh", "lwp-request", "GET", "aria2c")
	shutdowns   = set("shutdown", "reboot", "halt", "poweroff")
	mkfsLike    = set("mke2fs", "mkswap", "mkdosfs", "mkntfs", "mkexfatfs", "newfs")
	diskTools   = set("wipefs", "sfdisk", "sgdisk", "blkdiscard", "fdisk", "gdisk", "parted", "cfdisk")
	killByName  = set("pkill", "killall", "killall5")
	searchTools = set("grep", "egrep", "fgrep", "rg", "ag", "ack", "zgrep", "git-grep")
	sqlClients  = set("psql", "mysql", "mariadb", "sqlite3", "sqlite", "sqlcmd", "duckdb", "clickhouse-client",
		"clickhouse", "cockroach", "redis-cli", "mongo", "mongosh", "cqlsh", "usql", "pgcli", "mycli", "litecli")
	// interpreterInline lists, per interpreter, the short options that give
	// the program inline (so it is not read from stdin) and the short
	// options that take a separate value.
	interpreterInline = map[string][2]string{
		"python": {"cm", "WXQ"},
		"perl":   {"eE", ""},
		"ruby":   {"e", ""},
		"node":   {"ep", "r"},
		"php":    {"rfF", ""},
		"lua":    {"e", "l"},
		"pwsh":   {"c", ""},
	}
	systemDirs = set("bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "opt", "proc", "root",
		"run", "sbin", "srv", "sys", "usr", "var", "snap", "nix", "System", "Library", "Applications", "Users", "private")
	systemSubdirs = set("usr/bin", "usr/sbin", "usr/lib", "usr/lib32", "usr/lib64", "usr/libexec", "usr/share",
		"usr/include", "usr/local", "var/lib", "private/etc", "private/var")
	rcFiles = set(".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zprofile",
		".zshenv", ".zlogin", ".zlogout", ".kshrc", ".mkshrc", ".cshrc", ".tcshrc", "config.fish", ".bash_aliases")
	safeDevices  = set("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/stdout", "/dev/stderr", "/dev/stdin", "/dev/tty")
	blockDevices = regexp.MustCompile(`^/dev/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme[0-9]|mmcblk[0-9]|r?disk[0-9]|md[0-9]|md/|dm-[0-9]|mapper/|loop[0-9]|nbd[0-9]|sr[0-9]|zd[0-9]|bcache[0-9]|disk/|root$)`)
)

// interpreterKind maps python3.12, nodejs and friends to a key of
// interpreterInline; "shell" for shells, "" for anything else.
func interpreterKind(name string) string {
	switch {
	case shells[name]:
		return "shell"
	case strings.HasPrefix(name, "python"), strings.HasPrefix(name, "pypy"):
		return "python"
	case strings.HasPrefix(name, "perl"):
		return "perl"
	case name == "nodejs", name == "bun", name == "deno":
		return "node"
	case strings.HasPrefix(name, "php"):
		return "php"
	case strings.HasPrefix(name, "lua"):
		return "lua"
	case strings.HasPrefix(name, "ruby"):
		return "ruby"
	}
	if _, ok := interpreterInline[name]; ok {
		return name
	}
	return ""
}

// shellInvocation reads a shell's arguments: whether -c gives a command
// string, that string, whether it reads commands from stdin (-s or no
// script operand), and its operands.
func shellInvocation(args []arg) (cmode bool, stdin bool, operands []arg) {
	i := 0
	for i < len(args) {
		s := args[i].s
		if args[i].dynStart {
			break
		}
		if s == "--" || s == "-" {
			i++
			if s == "-" {
				stdin = true
			}
			break
		}
		if strings.HasPrefix(s, "--") {
			if s == "--rcfile" || s == "--init-file" {
				i++
			}
			i++
			continue
		}
		if len(s) < 2 || s[0] != '-' && s[0] != '+' {
			break
		}
		for _, ch := range s[1:] {
			switch ch {
			case 'c':
				cmode = cmode || s[0] == '-'
			case 's':
				stdin = true
			case 'o', 'O':
				i++ // -o pipefail
			}
		}
		i++
	}
	if i > len(args) {
		i = len(args)
	}
	operands = args[i:]
	if !cmode && len(operands) == 0 {
		stdin = true
	}
	return cmode, stdin, operands
}

// readsProgramFromStdin reports whether interpreter name, run with args,
// takes its program from standard input (as in curl … | sh).
func readsProgramFromStdin(name string, args []arg) bool {
	kind := interpreterKind(name)
	switch kind {
	case "":
		return false
	case "shell":
		cmode, stdin, _ := shellInvocation(args)
		return !cmode && stdin
	}
	flags := interpreterInline[kind]
	for i := 0; i < len(args); i++ {
		s := args[i].s
		switch {
		case s == "--":
			return i+1 >= len(args) || args[i+1].s == "-"
		case s == "-":
			return true
		case s == "--eval" || s == "--print" || s == "--command" || strings.HasPrefix(s, "--eval=") || strings.HasPrefix(s, "--print="):
			return false
		case strings.HasPrefix(s, "--"):
			continue
		case len(s) > 1 && s[0] == '-':
			for j := 1; j < len(s); j++ {
				if strings.IndexByte(flags[0], s[j]) >= 0 {
					return false
				}
				if strings.IndexByte(flags[1], s[j]) >= 0 {
					if j == len(s)-1 {
						i++
					}
					break
				}
			}
		default:
			return false // a script file
		}
	}
	return true
}

// command classifies one simple command given as rendered words.
func (c *classifier) command(args []arg, cx cmdCtx) {
	r := resolve(args)
	for _, e := range r.elevated {
		c.add(RiskDangerous, "privilege-elevation", fmt.Sprintf("runs with elevated privileges (%s)", e))
	}
	for _, src := range r.shellSrc {
		c.nested(src)
	}
	if r.dynamic {
		c.add(RiskDangerous, "dynamic-command", fmt.Sprintf("command name is computed at run time (%s)", r.dynText))
		return
	}
	if r.name == "" {
		return
	}
	cx.xargs = cx.xargs || r.xargs
	c.rules(r.name, r.args, cx)
}

// rules applies the per-command rules to a resolved command.
func (c *classifier) rules(name string, args []arg, cx cmdCtx) {
	switch {
	case name == "rm":
		c.rm(args)
	case name == "find":
		c.find(args)
	case name == "dd":
		c.dd(args)
	case strings.HasPrefix(name, "mkfs") || mkfsLike[name]:
		c.add(RiskHardline, "mkfs", fmt.Sprintf("creates a filesystem, destroying the device's data (%s)", name))
	case diskTools[name]:
		if o, _ := parseAll(args, optSpec{}); !o.has("l", "--list") || name == "wipefs" || name == "blkdiscard" {
			c.add(RiskDangerous, "disk-partition", fmt.Sprintf("rewrites disk partitions or signatures (%s)", name))
		}
	case shutdowns[name]:
		c.add(RiskHardline, "shutdown", fmt.Sprintf("shuts down or reboots the machine (%s)", name))
	case name == "init" || name == "telinit":
		if _, ops := parseAll(args, optSpec{}); len(ops) > 0 && (ops[0].s == "0" || ops[0].s == "6") {
			c.add(RiskHardline, "shutdown", fmt.Sprintf("shuts down or reboots the machine (%s %s)", name, ops[0].s))
		}
	case name == "systemctl" || name == "loginctl":
		_, ops := parseAll(args, optSpec{shortArg: "HMtpsnoP", longArg: []string{"host", "machine", "type", "property", "signal", "lines", "output", "state", "kill-whom", "root", "job-mode", "when", "message"}})
		if len(ops) > 0 {
			switch ops[0].s {
			case "poweroff", "reboot", "halt", "kexec", "soft-reboot":
				c.add(RiskHardline, "shutdown", fmt.Sprintf("shuts down or reboots the machine (%s %s)", name, ops[0].s))
			}
		}
	case name == "chmod":
		c.chmod(args)
	case name == "chown" || name == "chgrp":
		c.chown(name, args)
	case name == "git":
		c.git(args)
	case name == "kill":
		c.kill(args)
	case killByName[name]:
		c.add(RiskDangerous, "pkill", fmt.Sprintf("kills processes by name (%s)", name))
	case name == "truncate" || name == "shred":
		_, ops := parseAll(args, optSpec{shortArg: "srn", longArg: []string{"size", "reference", "iterations", "random-source"}})
		for _, t := range ops {
			c.writeTarget(t, name)
		}
		c.add(RiskDangerous, name, fmt.Sprintf("destroys file contents (%s)", name))
	case name == "crontab":
		o, ops := parseAll(args, optSpec{shortArg: "u"})
		switch {
		case o.has("r", "--remove"):
			c.add(RiskDangerous, "crontab-remove", "removes the crontab (crontab -r)")
		case o.has("-") || len(ops) > 0:
			c.add(RiskDangerous, "crontab-replace", "replaces the crontab (crontab FILE)")
		}
	case name == "curl":
		o, _ := parseAll(args, curlSpec)
		c.optTargets(name, o, "o", "--output", "D", "--dump-header", "c", "--cookie-jar")
	case name == "wget":
		o, _ := parseAll(args, wgetSpec)
		c.optTargets(name, o, "O", "--output-document", "o", "--output-file", "a", "--append-output")
	case name == "tee":
		_, ops := parseAll(args, optSpec{longArg: []string{"output-error"}})
		for _, t := range ops {
			c.writeTarget(t, "tee")
		}
	case name == "cp" || name == "mv" || name == "ln" || name == "install" || name == "rsync" || name == "scp":
		c.copyDest(name, args)
	case name == "sed":
		c.sedInPlace(args)
	case name == "cd" || name == "pushd":
		_, ops := parseAll(args, optSpec{})
		switch {
		case len(ops) == 0:
			c.cwdRisky = name == "cd" // cd alone goes home
		default:
			c.cwdRisky = !ops[0].dyn && criticalPath(ops[0].s, c.cwdRisky)
		}
	case name == "eval":
		if len(args) > 0 {
			c.nested(joinArgs(args))
		}
	case name == "trap":
		if _, ops := parseAll(args, optSpec{}); len(ops) > 1 && ops[0].s != "-" && ops[0].s != "" {
			c.nested(ops[0].s)
		}
	case shells[name]:
		cmode, stdin, ops := shellInvocation(args)
		switch {
		case cmode && len(ops) > 0:
			c.nested(ops[0].s)
		case stdin && cx.stdin != nil:
			c.nested(cx.stdin.s)
		}
	case name == "dropdb":
		c.add(RiskDangerous, "sql-destructive", "drops a database (dropdb)")
	}

	if interpreterKind(name) != "" || name == "source" || name == "." || name == "eval" {
		words := args
		if cx.stdin != nil {
			words = append(words[:len(words):len(words)], *cx.stdin)
		}
		for _, a := range words {
			if wordRunsDownloader(a.word) {
				c.add(RiskDangerous, "curl-pipe-shell", fmt.Sprintf("runs a downloaded script (%s fed by curl/wget)", name))
				break
			}
		}
	}
	if cx.xargs && name == "rm" {
		c.add(RiskDangerous, "xargs-rm", "deletes files named by its input (xargs rm)")
	}

	if !searchTools[name] {
		lenient := sqlClients[name]
		for _, a := range args {
			c.sqlScan(a.s, lenient)
		}
		if lenient && cx.stdin != nil {
			c.sqlScan(cx.stdin.s, true)
		}
	}
}

var (
	curlSpec = optSpec{shortArg: "AbcdDeEFHKmoPQrTuUwxXyYz", longArg: []string{"output", "output-dir", "data", "data-raw",
		"data-binary", "data-urlencode", "form", "header", "request", "user-agent", "referer", "user", "proxy",
		"upload-file", "range", "write-out", "config", "cookie", "cookie-jar", "dump-header", "max-time",
		"connect-timeout", "retry", "url", "cacert", "cert", "key"}}
	wgetSpec = optSpec{shortArg: "aABDeiIlOoPQRtTUwX", longArg: []string{"output-document", "output-file",
		"append-output", "directory-prefix", "tries", "timeout", "user-agent", "execute", "input-file", "wait",
		"quota", "level", "accept", "reject", "domains", "header", "user", "password", "post-data", "post-file",
		"body-data", "method"}}
)

// optTargets classifies the files named by the given options as written.
func (c *classifier) optTargets(name string, o opts, keys ...string) {
	for _, k := range keys {
		if v, ok := o[k]; ok && v != "-" {
			c.writeTarget(arg{s: v}, name)
		}
	}
}

// wordRunsDownloader reports whether a word holds a command or process
// substitution that runs curl, wget or another downloader.
func wordRunsDownloader(w *syntax.Word) bool {
	if w == nil {
		return false
	}
	found := false
	syntax.Walk(w, func(n syntax.Node) bool {
		if found {
			return false
		}
		if call, ok := n.(*syntax.CallExpr); ok && len(call.Args) > 0 {
			if downloaders[resolve(renderArgs(call.Args)).name] {
				found = true
			}
		}
		return !found
	})
	return found
}

// longMatch reports whether the long option o (without dashes or value)
// is an abbreviation of full that is at least min characters long.
func longMatch(o, full string, min int) bool {
	return len(o) >= min && strings.HasPrefix(full, o)
}

func (c *classifier) rm(args []arg) {
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
	if recursive {
		if noPreserve {
			c.add(RiskHardline, "rm-root", "recursive delete with --no-preserve-root")
		}
		for _, t := range targets {
			if criticalPath(t.s, c.cwdRisky) {
				c.add(RiskHardline, "rm-root", fmt.Sprintf("recursive delete of a root, home or system directory (rm -r %s)", t.s))
			}
		}
	}
	switch {
	case recursive && force:
		c.add(RiskDangerous, "rm-recursive", "recursive forced delete (rm -rf)")
	case recursive:
		c.add(RiskDangerous, "rm-recursive", "recursive delete (rm -r)")
	case force:
		c.add(RiskDangerous, "rm-force", "forced delete (rm -f)")
	case computed:
		c.add(RiskDangerous, "rm-computed-args", "rm with options computed at run time")
	}
}

// criticalPath reports whether deleting (or recursively changing) path p
// would wipe the root, a home directory or a top-level system directory.
// Relative wildcards count when an earlier cd went to such a place.
func criticalPath(p string, cwdRisky bool) bool {
	return critical(p, cwdRisky, true)
}

// systemPath is criticalPath without home directories: the root and the
// top-level system directories only.
func systemPath(p string, cwdRisky bool) bool {
	return critical(p, cwdRisky, false)
}

func critical(p string, cwdRisky, homes bool) bool {
	if p == "" {
		return false
	}
	if rest, ok := homeRelative(p); ok {
		if !homes {
			return false
		}
		c := path.Clean("/" + rest)
		return c == "/" || c == "/*" || c == "/.*" || c == "/."
	}
	if p[0] == '/' {
		c := path.Clean(p)
		c = strings.TrimSuffix(c, "/*")
		c = strings.TrimSuffix(c, "/.*")
		if c == "" || c == "/" {
			return true
		}
		parts := strings.Split(c[1:], "/")
		switch len(parts) {
		case 1:
			return systemDirs[parts[0]] || hasGlob(parts[0])
		case 2:
			return systemSubdirs[c[1:]] || homes && (parts[0] == "home" || parts[0] == "Users") ||
				systemDirs[parts[0]] && hasGlob(parts[1])
		}
		return false
	}
	if cwdRisky {
		switch path.Clean(p) {
		case ".", "*", ".*", "..", "../*":
			return true
		}
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

// writeTarget classifies a file that a command writes to.
func (c *classifier) writeTarget(t arg, via string) {
	p := t.s
	if p == "" {
		return
	}
	if strings.HasPrefix(p, "/dev/") {
		clean := path.Clean(p)
		switch {
		case safeDevices[clean] || strings.HasPrefix(clean, "/dev/fd/") || strings.HasPrefix(clean, "/dev/pts/") || strings.HasPrefix(clean, "/dev/shm/"):
		case blockDevices.MatchString(clean):
			c.add(RiskHardline, "block-device-write", fmt.Sprintf("writes to block device %s (%s)", clean, via))
		default:
			c.add(RiskDangerous, "device-write", fmt.Sprintf("writes to device %s (%s)", clean, via))
		}
		return
	}
	if strings.HasPrefix(p, "/proc/") || strings.HasPrefix(p, "/sys/") {
		if clean := path.Clean(p); clean == "/proc/sysrq-trigger" {
			c.add(RiskHardline, "sysrq", fmt.Sprintf("writes to %s, which can reboot or crash the machine (%s)", clean, via))
		} else {
			c.add(RiskDangerous, "kernel-write", fmt.Sprintf("changes kernel settings (%s %s)", via, clean))
		}
		return
	}
	norm := p
	if rest, ok := homeRelative(p); ok {
		norm = "~/" + rest
	} else if p[0] == '/' {
		norm = path.Clean(p)
	}
	parts := strings.Split(norm, "/")
	switch {
	case strings.HasPrefix(norm, "/etc/") || norm == "/etc" || strings.HasPrefix(norm, "/private/etc/"):
		c.add(RiskDangerous, "write-etc", fmt.Sprintf("writes into /etc (%s %s)", via, p))
	case containsString(parts, ".ssh"):
		c.add(RiskDangerous, "write-ssh", fmt.Sprintf("writes into ~/.ssh (%s %s)", via, p))
	case rcFiles[parts[len(parts)-1]]:
		c.add(RiskDangerous, "write-shell-rc", fmt.Sprintf("writes to a shell startup file (%s %s)", via, p))
	}
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
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
	if len(paths) == 0 && c.cwdRisky {
		c.add(RiskHardline, "find-root-delete", "find deleting from a root, home or system directory")
	}
	for _, p := range paths {
		if criticalPath(p.s, c.cwdRisky) {
			c.add(RiskHardline, "find-root-delete", fmt.Sprintf("find deleting from a root, home or system directory (find %s -delete)", p.s))
		}
	}
	c.add(RiskDangerous, "find-delete", "deletes the files find matches (find -delete / -exec rm)")
}

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

func (c *classifier) chmod(args []arg) {
	var recursive, ref bool
	var ops []arg
	end := false
	for _, a := range args {
		s := a.s
		switch {
		case end || a.dynStart:
			ops = append(ops, a)
		case s == "--":
			end = true
		case strings.HasPrefix(s, "--"):
			o, _, _ := strings.Cut(s[2:], "=")
			recursive = recursive || longMatch(o, "recursive", 3)
			ref = ref || longMatch(o, "reference", 3)
		case len(s) > 1 && s[0] == '-' && strings.Trim(s[1:], "Rcfv") == "":
			recursive = recursive || strings.ContainsRune(s, 'R')
		default:
			ops = append(ops, a) // includes modes such as -w
		}
	}
	mode, targets := "", ops
	if !ref && len(ops) > 0 {
		mode, targets = ops[0].s, ops[1:]
	}
	if recursive {
		for _, t := range targets {
			if systemPath(t.s, c.cwdRisky) {
				c.add(RiskHardline, "chmod-root", fmt.Sprintf("recursive permission change of the root or a system directory (chmod -R %s)", t.s))
			}
		}
	}
	if worldWritable(mode) {
		c.add(RiskDangerous, "chmod-world-writable", fmt.Sprintf("makes files world-writable (chmod %s)", mode))
	}
	if recursive {
		c.add(RiskDangerous, "chmod-recursive", "recursive permission change (chmod -R)")
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
	var ops []arg
	end := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		s := a.s
		switch {
		case end || a.dynStart:
			ops = append(ops, a)
		case s == "--":
			end = true
		case strings.HasPrefix(s, "--"):
			o, _, hasVal := strings.Cut(s[2:], "=")
			recursive = recursive || longMatch(o, "recursive", 3)
			ref = ref || longMatch(o, "reference", 3)
			if longMatch(o, "from", 2) && !hasVal {
				i++
			}
		case len(s) > 1 && s[0] == '-':
			recursive = recursive || strings.ContainsRune(s, 'R')
		default:
			ops = append(ops, a)
		}
	}
	targets := ops
	if !ref && len(ops) > 0 {
		targets = ops[1:]
	}
	if !recursive {
		return
	}
	for _, t := range targets {
		if systemPath(t.s, c.cwdRisky) {
			c.add(RiskHardline, "chown-root", fmt.Sprintf("recursive ownership change of the root or a system directory (%s -R %s)", name, t.s))
		}
	}
	c.add(RiskDangerous, "chown-recursive", fmt.Sprintf("recursive ownership change (%s -R)", name))
}

func (c *classifier) copyDest(name string, args []arg) {
	sp := optSpec{shortArg: "StT", longArg: []string{"target-directory", "suffix", "backup"}}
	switch name {
	case "install":
		sp.shortArg = "gmoStT"
		sp.longArg = append(sp.longArg, "group", "mode", "owner", "strip-program")
	case "rsync":
		sp = optSpec{shortArg: "efTBM", longArg: []string{"rsh", "filter", "temp-dir", "block-size", "exclude", "include", "exclude-from", "include-from", "files-from", "out-format", "log-file", "password-file", "chmod", "chown", "rsync-path"}}
	case "scp":
		sp = optSpec{shortArg: "cFiJloPS"}
	}
	o, ops := parseAll(args, sp)
	if name == "rsync" || name == "scp" {
		if sh, ok := o.get("e", "--rsh"); ok && name == "rsync" {
			c.nested(sh)
		}
	}
	if t, ok := o.get("t", "--target-directory"); ok && name != "rsync" && name != "scp" {
		c.writeTarget(arg{s: t}, name)
		return
	}
	if len(ops) >= 2 {
		c.writeTarget(ops[len(ops)-1], name)
	}
}

func (c *classifier) sedInPlace(args []arg) {
	o, ops := parseAll(args, optSpec{shortArg: "efl", longArg: []string{"expression", "file", "line-length"}})
	inPlace := o.has("i")
	for k := range o {
		if strings.HasPrefix(k, "--") && longMatch(k[2:], "in-place", 2) {
			inPlace = true
		}
	}
	if !inPlace {
		return
	}
	files := ops
	if !o.has("e", "f", "--expression", "--file") && len(files) > 0 {
		files = files[1:]
	}
	for _, f := range files {
		c.writeTarget(f, "sed -i")
	}
}

func (c *classifier) kill(args []arg) {
	i := 0
	if len(args) > 0 {
		s := args[0].s
		switch {
		case s == "-l" || s == "-L" || s == "--list":
			return
		case s == "-s" || s == "-n" || s == "--signal":
			i = 2
		case s == "--":
			i = 1
		case strings.HasPrefix(s, "-"):
			i = 1
		}
	}
	if i < len(args) && args[i].s == "--" {
		i++
	}
	for ; i < len(args); i++ {
		switch args[i].s {
		case "-1":
			c.add(RiskDangerous, "kill-all", "signals every process you may signal (kill -1)")
		case "1":
			c.add(RiskDangerous, "kill-all", "signals init (kill 1)")
		}
	}
}

func (c *classifier) git(args []arg) {
	i := 0
	for i < len(args) {
		s := args[i].s
		switch {
		case s == "-c":
			if i+1 < len(args) {
				c.gitConfig(args[i+1].s)
			}
			i += 2
			continue
		case s == "-C" || s == "--git-dir" || s == "--work-tree" || s == "--namespace" || s == "--config-env" || s == "--super-prefix":
			i += 2
			continue
		case strings.HasPrefix(s, "-"):
			i++
			continue
		}
		break
	}
	if i >= len(args) {
		return
	}
	sub, rest := args[i].s, args[i+1:]
	o, ops := parseAll(rest, optSpec{shortArg: "omsCcb", longArg: []string{"push-option", "message", "repo", "receive-pack", "exec"}})
	longHas := func(full string, min int) bool {
		for k := range o {
			if strings.HasPrefix(k, "--") && longMatch(k[2:], full, min) {
				return true
			}
		}
		return false
	}
	switch sub {
	case "reset":
		if longHas("hard", 3) {
			c.add(RiskDangerous, "git-reset-hard", "discards uncommitted changes (git reset --hard)")
		}
	case "clean":
		if (o.has("f") || longHas("force", 3)) && !o.has("n") && !longHas("dry-run", 3) {
			c.add(RiskDangerous, "git-clean-force", "deletes untracked files (git clean -f)")
		}
	case "push":
		force := o.has("f") || longHas("force", 3) || longHas("force-with-lease", 7) || longHas("mirror", 2)
		for _, op := range ops {
			if strings.HasPrefix(op.s, "+") {
				force = true
			}
		}
		if force {
			c.add(RiskDangerous, "git-push-force", "force push rewrites remote history (git push --force)")
		}
	case "checkout":
		dashdash := false
		for _, a := range rest {
			if a.s == "--" {
				dashdash = true
			}
		}
		discard := o.has("f") || longHas("force", 3) || dashdash && len(ops) > 0
		for _, op := range ops {
			if op.s == "." || op.s == ":/" || op.s == "*" {
				discard = true
			}
		}
		if discard {
			c.add(RiskDangerous, "git-discard-changes", "discards uncommitted changes (git checkout -- …)")
		}
	case "restore":
		staged := o.has("S") || longHas("staged", 2)
		worktree := o.has("W") || longHas("worktree", 2)
		if len(ops) > 0 && (!staged || worktree) {
			c.add(RiskDangerous, "git-discard-changes", "discards uncommitted changes (git restore)")
		}
	case "switch":
		if o.has("f") || longHas("force", 3) || longHas("discard-changes", 2) {
			c.add(RiskDangerous, "git-discard-changes", "discards uncommitted changes (git switch --discard-changes)")
		}
	case "stash":
		if len(ops) > 0 && (ops[0].s == "drop" || ops[0].s == "clear") {
			c.add(RiskDangerous, "git-stash-drop", fmt.Sprintf("deletes stashed changes (git stash %s)", ops[0].s))
		}
	case "branch":
		if o.has("D") || (o.has("d") || longHas("delete", 3)) && (o.has("f") || longHas("force", 3)) {
			c.add(RiskDangerous, "git-branch-force-delete", "force-deletes a branch (git branch -D)")
		}
	}
}

// gitConfig looks at one "git -c key=value": aliases starting with ! and
// command-valued settings run a shell command, which is classified.
func (c *classifier) gitConfig(kv string) {
	key, val, _ := strings.Cut(kv, "=")
	key = strings.ToLower(key)
	switch {
	case strings.HasPrefix(key, "alias."):
		if cmd, ok := strings.CutPrefix(val, "!"); ok {
			c.nested(cmd)
		}
	case key == "core.pager" || key == "core.editor" || key == "core.sshcommand" || key == "sequence.editor" ||
		key == "diff.external" || key == "core.fsmonitor" || strings.HasPrefix(key, "pager."):
		c.nested(val)
	}
}

// SQL statements that destroy data. Inside SQL clients (psql -c, sqlite3,
// here-documents fed to them) they match in any case; elsewhere only in
// upper case, so that prose such as "drop table support" in a commit
// message stays safe.
var (
	sqlLenient = regexp.MustCompile(`(?im)\b(drop\s+(table|database|schema)\b|truncate\s+(table\b|[\w."]+\s*(;|$))|delete\s+from\s+[\w."]+\s*(;|$)|flushall\b|flushdb\b)`)
	sqlStrict  = regexp.MustCompile(`(?m)\b(DROP\s+(TABLE|DATABASE|SCHEMA)\b|TRUNCATE\s+(TABLE\b|[\w."]+\s*(;|$))|DELETE\s+FROM\s+[\w."]+\s*(;|$)|FLUSHALL\b|FLUSHDB\b)`)
)

func (c *classifier) sqlScan(s string, lenient bool) {
	if len(s) < 7 {
		return
	}
	re, hay := sqlStrict, s
	if lenient {
		re, hay = sqlLenient, strings.ToUpper(s)
	}
	// The regular expressions are slow on long text: look for a keyword first.
	if !strings.Contains(hay, "DROP") && !strings.Contains(hay, "TRUNCATE") &&
		!strings.Contains(hay, "DELETE") && !strings.Contains(hay, "FLUSH") {
		return
	}
	if m := re.FindString(s); m != "" {
		m = strings.Join(strings.Fields(m), " ")
		c.add(RiskDangerous, "sql-destructive", fmt.Sprintf("destructive SQL statement (%s)", strings.TrimSuffix(m, ";")))
	}
}

// sqlCheck scans here-documents and here-strings in the strict mode; the
// command they feed rescans them leniently when it is an SQL client.
func (c *classifier) sqlCheck(s string) { c.sqlScan(s, false) }
