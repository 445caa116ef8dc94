package risk

import (
	"fmt"
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// cmdCtx is what a simple command's statement tells about it.
type cmdCtx struct {
	stdin      *arg // here-document or here-string fed to it, if any
	stdinFile  *arg // file redirected to its standard input (< f), if any
	xargs      bool // runs under xargs, with arguments read from its input
	xargsKnown bool // runs under xargs fed by a static echo whose words are already in its arguments
	piped      bool // its standard input is a pipe from an earlier stage
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
	searchTools = set("grep", "egrep", "fgrep", "rg", "ag", "ack", "zgrep", "git-grep")
	sqlClients  = set("psql", "mysql", "mariadb", "sqlite3", "sqlite", "sqlcmd", "duckdb", "clickhouse-client",
		"clickhouse", "cockroach", "redis-cli", "mongo", "mongosh", "cqlsh", "usql", "pgcli", "mycli", "litecli")
	systemDirs = set("bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "opt", "proc", "root",
		"run", "sbin", "srv", "sys", "usr", "var", "snap", "nix", "System", "Library", "Applications", "Users", "private")
	systemSubdirs = set("usr/bin", "usr/sbin", "usr/lib", "usr/lib32", "usr/lib64", "usr/libexec", "usr/share",
		"usr/include", "usr/local", "var/lib", "private/etc", "private/var")
	rcFiles = set(".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zprofile",
		".zshenv", ".zlogin", ".zlogout", ".kshrc", ".mkshrc", ".cshrc", ".tcshrc", "config.fish", ".bash_aliases")
	safeDevices  = set("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/stdout", "/dev/stderr", "/dev/stdin", "/dev/tty")
	blockDevices = regexp.MustCompile(`^/dev/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme[0-9]|mmcblk[0-9]|r?disk[0-9]|md[0-9]|md/|dm-[0-9]|mapper/|loop[0-9]|nbd[0-9]|sr[0-9]|zd[0-9]|bcache[0-9]|disk/|root$)`)
)

// command classifies one simple command given as rendered words and
// returns it with its wrappers peeled off.
func (c *classifier) command(args []arg, cx cmdCtx) resolved {
	r := resolve(args)
	c.daemonFiles(r.name, args)
	for _, e := range r.elevated {
		c.add(RiskDangerous, KeyPrivilegeElevation, fmt.Sprintf("runs with elevated privileges (%s)", e))
	}
	for _, src := range r.shellSrc {
		c.nested(src)
	}
	for _, w := range r.writes {
		c.writeTarget(w, "output file")
	}
	for _, e := range r.execs {
		c.add(RiskDangerous, KeyExecOption, fmt.Sprintf("runs a program named in an option, which cannot be analysed (%s)", e))
	}
	for _, f := range r.scripts {
		c.noteRan(f.s)
	}
	for _, e := range r.envs {
		name, val, _ := strings.Cut(e.s, "=")
		c.envAssign(name, arg{s: val})
	}
	if r.userService != "" {
		c.add(RiskDangerous, KeyUserService, fmt.Sprintf("has a service of the user's run the command outside this command (%s)", r.userService))
	}
	if r.detached != "" {
		c.add(RiskDangerous, KeyScheduledCommand, fmt.Sprintf("runs a command in the background, outside this session (%s)", r.detached))
	}
	if r.exhausts != "" {
		c.add(RiskDangerous, KeyResourceExhaustion, fmt.Sprintf("starts as many processes as it can (%s)", r.exhausts))
	}
	if r.remote && (cx.stdinFile != nil || cx.stdin != nil) {
		c.add(RiskDangerous, KeyNetworkUpload, fmt.Sprintf("sends local data to another machine (%s with its input redirected)", r.remoteName))
	}
	if r.dynamic {
		c.add(RiskDangerous, KeyDynamicCommand, fmt.Sprintf("command name is computed at run time (%s)", r.dynText))
		return r
	}
	if r.name == "" {
		return r
	}
	if strings.Contains(r.word, "/") {
		c.noteShellRan(r.word, true) // ./s.sh; a bare name is looked up in $PATH
	}
	cx.xargs = cx.xargs || r.xargs && !cx.xargsKnown
	c.rules(r.name, r.args, cx)
	return r
}

// analyzer classifies one resolved command: name is its base name (rm,
// python3.12), args its arguments after the name, cx what its statement
// tells about it. Each family of commands has its file, which registers
// its analyzers by name in an init function.
type analyzer func(c *classifier, name string, args []arg, cx cmdCtx)

// analyzers maps a command's base name to its analyzer; prefixed maps a
// name prefix (mkfs.ext4) for commands that come in many spellings.
var (
	analyzers = map[string]analyzer{}
	prefixed  = map[string]analyzer{}
)

// register makes a handle the commands names.
func register(a analyzer, names ...string) {
	for _, n := range names {
		if _, dup := analyzers[n]; dup {
			panic("risk: two analyzers for " + n)
		}
		analyzers[n] = a
	}
}

// analyzerFor returns the analyzer of a command name, or nil.
func analyzerFor(name string) analyzer {
	if a, ok := analyzers[name]; ok {
		return a
	}
	for p, a := range prefixed {
		if strings.HasPrefix(name, p) {
			return a
		}
	}
	return nil
}

// rules applies the per-command rules to a resolved command.
func (c *classifier) rules(name string, args []arg, cx cmdCtx) {
	if a := analyzerFor(name); a != nil {
		a(c, name, args, cx)
	}
	c.noteRunner(name)
	c.noteModuleRuns(name, args)
	c.rawDevice(name, args, cx)

	if k := interpreterKind(name); k != "" && k != "shell" {
		c.interpreter(name, args, cx)
	}
	if interpreterKind(name) != "" || name == "source" || name == "." || name == "eval" {
		words := args
		if cx.stdin != nil {
			words = append(words[:len(words):len(words)], *cx.stdin)
		}
		for _, a := range words {
			if wordRunsDownloader(a.word) {
				c.add(RiskDangerous, KeyCurlPipeShell, fmt.Sprintf("runs a downloaded script (%s fed by curl/wget)", name))
				break
			}
		}
	}
	if cx.xargs && name == "rm" {
		c.add(RiskDangerous, KeyXargsRm, "deletes files named by its input (xargs rm)")
	}

	if !searchTools[name] {
		lenient := sqlClients[name]
		for _, a := range args {
			c.sqlScan(a.s, lenient)
			if lenient {
				c.sqlShell(name, a.s)
			}
		}
		if lenient && cx.stdinFile != nil {
			c.noteRan(cx.stdinFile.s) // SQL written and fed to the client by the same command
		}
		if lenient && cx.stdin != nil {
			c.sqlScan(cx.stdin.s, true)
			c.sqlShell(name, cx.stdin.s)
		}
	}
}

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
	walkCalls(w, func(args []arg) {
		found = found || downloaders[resolve(args).name]
	})
	return found
}

// walkCalls calls f with the rendered words of every simple command
// inside n (a word's command substitutions, a statement), in source order.
func walkCalls(n syntax.Node, f func(args []arg)) {
	syntax.Walk(n, func(n syntax.Node) bool {
		if call, ok := n.(*syntax.CallExpr); ok && len(call.Args) > 0 {
			f(renderArgs(call.Args))
		}
		return true
	})
}

// longMatch reports whether the long option o (without dashes or value)
// is an abbreviation of full that is at least min characters long.
func longMatch(o, full string, min int) bool {
	return len(o) >= min && strings.HasPrefix(full, o)
}

// hasComponent reports whether the slash-separated path p has a component
// named name.
func hasComponent(p, name string) bool {
	for p != "" {
		var part string
		part, p, _ = strings.Cut(p, "/")
		if part == name {
			return true
		}
	}
	return false
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

var (
	vimNames = set("vim", "vi", "nvim", "view", "vimdiff", "gvim", "ex", "evim", "gview", "nvi", "elvis")
	awkNames = set("awk", "gawk", "mawk", "nawk", "original-awk", "goawk", "bwk-awk")
	// harmless commands for settings that name a pager, an editor or an
	// ssh program: a value made of one of them and plain words runs
	// nothing else.
	pagerCmds  = set("cat", "less", "more", "most", "true", "false", ":")
	editorCmds = set("true", "false", ":", "cat", "vi", "vim", "nvim", "nano", "emacs", "ed")
	sshCmds    = set("ssh")
	// compressors that tar -I / --use-compress-program may name.
	compressors = set("gzip", "gunzip", "pigz", "unpigz", "bzip2", "bunzip2", "pbzip2", "lbzip2", "xz", "unxz", "pixz",
		"lzma", "unlzma", "lzip", "plzip", "lzop", "lz4", "zstd", "unzstd", "zstdmt", "pzstd", "brotli", "compress", "uncompress")
	// envCommands are environment variables whose value is a command that
	// programs run, with the harmless commands they may name.
	envCommands = map[string]map[string]bool{
		"GIT_SSH_COMMAND": sshCmds, "GIT_SSH": sshCmds, "RSYNC_RSH": sshCmds, "CVS_RSH": sshCmds,
		"PAGER": pagerCmds, "GIT_PAGER": pagerCmds, "MANPAGER": pagerCmds, "SYSTEMD_PAGER": pagerCmds, "BAT_PAGER": pagerCmds,
		"EDITOR": editorCmds, "VISUAL": editorCmds, "GIT_EDITOR": editorCmds, "GIT_SEQUENCE_EDITOR": editorCmds,
		"GIT_EXTERNAL_DIFF": nil, "GIT_PROXY_COMMAND": nil, "GIT_ASKPASS": pagerCmds, "SSH_ASKPASS": pagerCmds,
		"SUDO_ASKPASS": pagerCmds, "PROMPT_COMMAND": nil, "LESSOPEN": nil, "LESSCLOSE": nil, "BROWSER": nil,
	}
	// envPrograms are environment variables that make programs load code
	// that cannot be analysed.
	envPrograms = set("LD_PRELOAD", "LD_AUDIT", "DYLD_INSERT_LIBRARIES", "BASH_ENV", "ENV", "GIT_EXEC_PATH",
		"GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG", "GIT_TEMPLATE_DIR",
		"PERL5OPT", "PERL5DB", "PERLDB_OPTS", "PYTHONSTARTUP", "RUBYOPT", "GIT_ALLOW_PROTOCOL", "JAVA_TOOL_OPTIONS",
		"_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "ZDOTDIR", "PYTHONHOME", "LUA_INIT", "PHPRC", "PHP_INI_SCAN_DIR")
	// nodeCodeOptions are the NODE_OPTIONS flags that load code.
	nodeCodeOptions = []string{"-r", "--require", "--import", "--loader", "--experimental-loader", "--experimental-policy", "--env-file", "--inspect"}
)

// harmless reports whether cmd, a command string, is empty or one of the
// allowed commands with plain arguments (less -R, ssh -i key).
func harmless(cmd string, allowed map[string]bool) bool {
	if strings.TrimSpace(cmd) == "" {
		return true
	}
	if allowed == nil || strings.ContainsAny(cmd, ";&|<>$`()\\\n'\"{}*?[") {
		return false
	}
	f := strings.Fields(cmd)
	return len(f) > 0 && allowed[commandName(f[0])]
}

// execOption classifies a shell command given in an option or setting
// (git -c core.pager=…, tar --to-command=…): it is parsed, and unless it
// is harmless it is dangerous in itself, since it is easy to overlook.
func (c *classifier) execOption(cmd, via string, allowed map[string]bool) {
	c.nested(cmd)
	if !harmless(cmd, allowed) {
		c.add(RiskDangerous, KeyExecOption, fmt.Sprintf("runs a command given in an option (%s)", via))
	}
}

// assign classifies a variable assignment (FOO=bar cmd, export FOO=bar):
// some variables hold commands that programs run.
func (c *classifier) assign(a *syntax.Assign) {
	if a.Name == nil || a.Value == nil {
		return
	}
	v := renderString(a.Value)
	c.aliasesDaemonCLI(a.Name.Value, v.s)
	if v.s == "$!" && len(c.jobVars) < maxFileNotes {
		if c.jobVars == nil {
			c.jobVars = map[string]bool{}
		}
		c.jobVars[a.Name.Value] = true // pid=$!: a job this command started
	}
	c.envAssign(a.Name.Value, v)
}

func (c *classifier) envAssign(name string, v arg) {
	if allowed, ok := envCommands[name]; ok {
		c.execOption(v.s, name+"="+v.s, allowed)
		return
	}
	if (name == "PS4" || name == "PS1" || name == "PS0") && strings.ContainsAny(v.s, "$`") && (strings.Contains(v.s, "$(") || strings.Contains(v.s, "`")) {
		c.execOption(strings.TrimSpace(v.s), name+"="+v.s, nil) // expanded, command substitutions and all, by the shell
		return
	}
	if name == "NODE_OPTIONS" || name == "BUN_OPTIONS" || name == "DENO_OPTIONS" {
		for _, f := range strings.Fields(v.s) {
			for _, o := range nodeCodeOptions {
				if f == o || strings.HasPrefix(f, o+"=") {
					c.add(RiskDangerous, KeyExecOption, fmt.Sprintf("makes node load code that cannot be analysed (%s=%s)", name, v.s))
				}
			}
		}
		return
	}
	if (name == "DOCKER_HOST" || name == "CONTAINER_HOST") && strings.HasPrefix(v.s, "unix://") {
		c.add(RiskDangerous, KeyUserService, fmt.Sprintf("points container clients at the service behind a named socket (%s=%s)", name, v.s))
		return
	}
	if envPrograms[name] || strings.HasPrefix(name, "GIT_CONFIG_KEY_") || strings.HasPrefix(name, "GIT_CONFIG_VALUE_") {
		c.add(RiskDangerous, KeyExecOption, fmt.Sprintf("makes programs load code that cannot be analysed (%s=%s)", name, v.s))
		if name == "BASH_ENV" || name == "ENV" {
			c.noteRan(v.s)
		}
	}
}

// longOpt splits the long option args[*i] ("--name" or "--name=value") and
// returns its name and a function giving its value: the inline value, or
// the next argument, which the function consumes by advancing *i.
func longOpt(args []arg, i *int) (string, func() arg) {
	a := args[*i]
	o, val, hasVal := strings.Cut(a.s[2:], "=")
	return o, func() arg {
		if hasVal {
			return arg{s: val, dyn: a.dyn, word: a.word}
		}
		if *i+1 < len(args) {
			*i++
			return args[*i]
		}
		return arg{}
	}
}

// keys returns the members of a set made by set.
func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
