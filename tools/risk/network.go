package risk

import (
	"fmt"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

var (
	curlSpec = optSpec{shortArg: "AbcdDeEFHKmoPQrTuUwxXyYz", longArg: []string{"output", "output-dir", "data", "data-raw",
		"data-binary", "data-urlencode", "form", "header", "request", "user-agent", "referer", "user", "proxy",
		"upload-file", "range", "write-out", "config", "cookie", "cookie-jar", "dump-header", "max-time",
		"connect-timeout", "retry", "url", "cacert", "cert", "key", "json", "upload-file", "data-ascii", "unix-socket",
		"abstract-unix-socket"}}
	wgetSpec = optSpec{shortArg: "aABDeiIlOoPQRtTUwX", longArg: []string{"output-document", "output-file",
		"append-output", "directory-prefix", "tries", "timeout", "user-agent", "execute", "input-file", "wait",
		"quota", "level", "accept", "reject", "domains", "header", "user", "password", "post-data", "post-file",
		"body-data", "method"}}
)

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
	switch name {
	case "install":
		if m, ok := o.get("m", "--mode"); ok {
			c.setuidMode("install -m", m)
		}
	case "rsync":
		if sh, ok := o.get("e", "--rsh"); ok {
			c.execOption(sh, "rsync -e "+sh, sshCmds)
		}
		for k := range o {
			switch {
			case k == "--del" || strings.HasPrefix(k, "--delete"):
				c.add(RiskDangerous, KeyRsyncDelete, fmt.Sprintf("deletes files at the destination (rsync %s)", k))
			case k == "--remove-source-files" || k == "--remove-sent-files":
				c.add(RiskDangerous, KeyRemoveSourceFiles, fmt.Sprintf("deletes the files it copies (rsync %s)", k))
			}
		}
	case "scp":
		c.sshProgramOptions(name, args)
	}
	if t, ok := o.get("t", "--target-directory"); ok && name != "rsync" && name != "scp" {
		c.copiedInto(name, o, append(ops, arg{}), arg{s: t + "/"})
		if name == "mv" {
			c.moveSources(ops)
		}
		c.writeTarget(arg{s: t}, name)
		return
	}
	if len(ops) < 2 {
		return
	}
	dest := ops[len(ops)-1]
	c.copiedInto(name, o, ops[:len(ops)-1], dest)
	if name == "scp" || name == "rsync" {
		if remote(dest.s) && !allRemote(ops[:len(ops)-1]) {
			c.add(RiskDangerous, KeyNetworkUpload, fmt.Sprintf("copies local files to another machine (%s … %s)", name, dest.s))
		}
		if remote(dest.s) {
			return
		}
	}
	c.writeTarget(dest, name)
	switch name {
	case "mv":
		c.moveSources(ops[:len(ops)-1])
		if d, _ := c.abs(dest.s); d == "/dev/null" {
			c.add(RiskDangerous, KeyRemoveSourceFiles, "moves files into /dev/null, destroying them (mv … /dev/null)")
		}
	case "ln":
		if o.has("f", "--force") && slices.ContainsFunc(ops[:len(ops)-1], func(a arg) bool { return a.s == "/dev/null" }) {
			c.emptied(dest, "ln -sf /dev/null "+dest.s)
		}
	case "cp", "install":
		for _, src := range ops[:len(ops)-1] {
			if src.s == "/dev/null" {
				c.emptied(dest, name+" /dev/null "+dest.s)
			}
		}
	}
}

// copiedInto notes the files a copy or move writes without naming them:
// into a directory (several sources, a destination ending in / or . or
// ..), each source's base name; a recursive copy into the working
// directory writes a whole tree there (treeWritten), so that a script run
// after it is not taken for the text a literal wrote.
func (c *classifier) copiedInto(name string, o opts, srcs []arg, dest arg) {
	d := dest.s
	here := d == "." || d == "./" || d == "$PWD" || d == "$PWD/"
	if here && (name == "rsync" || name == "scp" || o.has("r", "R", "a", "--recursive", "--archive")) {
		c.treeWritten = true // a tree copied into the working directory
	}
	if len(srcs) > 1 || strings.HasSuffix(d, "/") || d == "." || d == ".." || strings.HasSuffix(d, "/.") || strings.HasSuffix(d, "/..") {
		for _, s := range srcs {
			c.noteWritten(s.s)
		}
	}
}

// moveSources flags mv of the home directory, one of its dot-entries
// (~/.ssh, ~/.config) or the root or a system directory (/usr, /etc,
// /usr/bin, /home/NAME), given as written or after cd.
func (c *classifier) moveSources(srcs []arg) {
	for _, s := range srcs {
		a, ok := c.abs(strings.TrimRight(s.s, "/"))
		if s.s != "" && strings.TrimRight(s.s, "/") == "" {
			a, ok = "/", true
		}
		rest, inHome := strings.CutPrefix(a, homeDir+"/")
		if ok && (a == homeDir || inHome && strings.HasPrefix(rest, ".") && !strings.Contains(rest, "/")) || c.criticalAny(s, true) {
			c.add(RiskDangerous, KeyMoveHomeOrSystem, fmt.Sprintf("moves the home, a dot-directory of it or a system directory (mv %s)", s.s))
			return
		}
	}
}

// sshProgramOptions classifies scp's and sftp's -o options like ssh's, and
// -S PROGRAM (-D for sftp), which replaces the ssh program.
func (c *classifier) sshProgramOptions(name string, args []arg) {
	var r resolved
	sshOptions(args, optSpec{shortArg: "cFiJloPSDBRs"}, &r)
	for _, src := range r.shellSrc {
		c.execOption(src, name+" -o", sshCmds)
	}
	for _, e := range r.execs {
		c.add(RiskDangerous, KeyExecOption, fmt.Sprintf("runs a program named in an option, which cannot be analysed (%s)", e))
	}
	o, _ := parseAll(args, optSpec{shortArg: "cFiJloPSDBRs"})
	for _, k := range []string{"S", "D"} {
		if v, ok := o[k]; ok && !harmless(v, sshCmds) {
			c.add(RiskDangerous, KeyExecOption, fmt.Sprintf("runs a program named in an option (%s -%s %s)", name, k, v))
		}
	}
}

func init() {
	register(curl, "curl")
	register(func(c *classifier, name string, args []arg, _ cmdCtx) {
		o, _ := parseAll(args, wgetSpec)
		c.optTargets(name, o, "O", "--output-document", "o", "--output-file", "a", "--append-output")
		if f, ok := o.get("--post-file", "--body-file"); ok {
			c.add(RiskDangerous, KeyNetworkUpload, fmt.Sprintf("sends a local file off the machine (wget --post-file %s)", f))
		}
		for _, d := range computedData(args, func(k string) bool { return k == "--post-data" || k == "--body-data" }) {
			c.add(RiskDangerous, KeyNetworkUpload, fmt.Sprintf("sends data computed at run time off the machine (wget %s)", d))
		}
	}, "wget")
	register(httpie, "http", "https", "xh", "xhs")
	register(netcat, keys(netcats)...)
	register(func(c *classifier, name string, _ []arg, _ cmdCtx) {
		c.add(RiskDangerous, KeyNetworkUpload, fmt.Sprintf("sends mail, and with it local data, off the machine (%s)", name))
	}, "mail", "mailx", "mutt", "sendmail", "msmtp", "ssmtp", "swaks", "neomutt")
	register(func(c *classifier, name string, args []arg, _ cmdCtx) { c.copyDest(name, args) }, "rsync", "scp")
	register(func(c *classifier, name string, args []arg, _ cmdCtx) { c.sshProgramOptions(name, args) }, "sftp")
}

// remote reports whether an scp or rsync operand names another machine
// (host:path, user@host:path, rsync://…).
func remote(s string) bool {
	if strings.Contains(s, "://") {
		return true
	}
	i := strings.IndexByte(s, ':')
	return i > 0 && !strings.Contains(s[:i], "/")
}

func allRemote(ops []arg) bool {
	for _, o := range ops {
		if !remote(o.s) {
			return false
		}
	}
	return len(ops) > 0
}

// curl sends local data with -T/--upload-file, -d @file and friends, -F
// name=@file or name=<file, --json @file; it writes the files of -o, -D
// and -c.
func curl(c *classifier, name string, args []arg, cx cmdCtx) {
	o := opts{}
	var urls []arg
	ops := eachOpt(args, curlSpec, func(k, v string) {
		if k == "--url" {
			urls = append(urls, arg{s: v})
		}
	})
	eachOpt(args, curlSpec, func(k, v string) {
		if k == "--abstract-unix-socket" || k == "--unix-socket" && c.outsideCwd(v) {
			c.add(RiskDangerous, KeyUserService, fmt.Sprintf("talks to a service through its Unix socket, outside this command (curl %s %s)", k, v))
		}
	})
	if loopbackOnly(append(urls, ops...)) {
		c.optTargets(name, optsOf(args, curlSpec), "o", "--output", "D", "--dump-header", "c", "--cookie-jar")
		return // the data stays on this machine
	}
	for _, d := range computedData(args, curlDataOption) {
		c.add(RiskDangerous, KeyNetworkUpload, fmt.Sprintf("sends data computed at run time off the machine (curl %s)", d))
	}
	eachOpt(args, curlSpec, func(k, v string) {
		o[k] = v
		switch {
		case k == "T" || longMatch(strings.TrimPrefix(k, "--"), "upload-file", 8):
			c.add(RiskDangerous, KeyNetworkUpload, fmt.Sprintf("sends a local file off the machine (curl -T %s)", v))
		case (k == "d" || strings.HasPrefix(k, "--data") || k == "--json") && (strings.HasPrefix(v, "@") || k == "--data-urlencode" && strings.Contains(v, "@")):
			c.add(RiskDangerous, KeyNetworkUpload, fmt.Sprintf("sends a local file off the machine (curl %s %s)", k, v))
		case (k == "F" || k == "--form") && (strings.Contains(v, "=@") || strings.Contains(v, "=<")):
			c.add(RiskDangerous, KeyNetworkUpload, fmt.Sprintf("sends a local file off the machine (curl -F %s)", v))
		case k == "K" || k == "--config":
			c.add(RiskDangerous, KeyNetworkUpload, fmt.Sprintf("reads its options, which may upload files, from a file (curl %s %s)", k, v))
		}
	})
	c.optTargets(name, o, "o", "--output", "D", "--dump-header", "c", "--cookie-jar")
}

// curlDataOption reports whether curl option k (-d, --data-raw, -F, …)
// takes data to send.
func curlDataOption(k string) bool {
	return k == "-d" || k == "-F" || k == "--json" || strings.HasPrefix(k, "--data") || k == "--form" || k == "--form-string"
}

// computedData returns the data options (as dataOpt tells them by key,
// "-d" or "--data") whose value holds a command or process substitution,
// such as curl -d "$(cat .env)": what is sent is read at run time.
func computedData(args []arg, dataOpt func(key string) bool) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		var key string
		var val *arg
		switch {
		case strings.HasPrefix(a.s, "--"):
			k, _, hasVal := strings.Cut(a.s, "=")
			key = k
			if hasVal {
				val = &args[i]
			} else if i+1 < len(args) {
				val = &args[i+1]
			}
		case len(a.s) >= 2 && a.s[0] == '-':
			key = a.s[:2]
			if len(a.s) > 2 {
				val = &args[i]
			} else if i+1 < len(args) {
				val = &args[i+1]
			}
		default:
			continue
		}
		if dataOpt(key) && val != nil && holdsSubst(val.word) {
			out = append(out, key+" "+val.s)
		}
	}
	return out
}

// holdsSubst reports whether w holds a command or process substitution.
func holdsSubst(w *syntax.Word) bool {
	found := false
	if w != nil {
		syntax.Walk(w, func(n syntax.Node) bool {
			switch n.(type) {
			case *syntax.CmdSubst, *syntax.ProcSubst:
				found = true
			}
			return !found
		})
	}
	return found
}

// httpie sends files named with @ (field@file, field=@file, @file).
func httpie(c *classifier, name string, args []arg, cx cmdCtx) {
	_, ops := parseAll(args, optSpec{shortArg: "aAvpo", longArg: []string{"auth", "auth-type", "print", "output", "session", "verify", "cert", "cert-key", "proxy", "timeout", "style", "format-options"}})
	for _, a := range ops {
		if strings.Contains(a.s, "@") && (strings.HasPrefix(a.s, "@") || strings.Contains(a.s, "=@") || strings.Contains(a.s, ":=@") ||
			strings.IndexByte(a.s, '@') > 0 && !strings.ContainsAny(a.s[:strings.IndexByte(a.s, '@')], "=:/.")) {
			c.add(RiskDangerous, KeyNetworkUpload, fmt.Sprintf("sends a local file off the machine (%s %s)", name, a.s))
		}
	}
	if cx.stdinFile != nil {
		c.add(RiskDangerous, KeyNetworkUpload, fmt.Sprintf("sends a local file off the machine (%s < %s)", name, cx.stdinFile.s))
	}
}

// netcats are raw network clients: what they read goes off the machine.
var netcats = set("nc", "ncat", "netcat", "socat", "telnet", "nc.openbsd", "nc.traditional", "pwncat", "cryptcat")

// netcat sends its standard input to the other end unless it listens;
// a file or here-document on its input is local data leaving; -e and -c
// run a program for the other end (a remote shell).
func netcat(c *classifier, name string, args []arg, cx cmdCtx) {
	o, _ := parseAll(args, optSpec{shortArg: "ecpswiIOqTVXxMmW", longArg: []string{"exec", "sh-exec", "lua-exec", "source-port", "source", "wait", "proxy", "proxy-type"}})
	if v, ok := o.get("e", "c", "--exec", "--sh-exec", "--lua-exec"); ok {
		c.add(RiskDangerous, KeyExecOption, fmt.Sprintf("gives the other end a program to run (%s -e %s)", name, v))
	}
	if _, ops := parseAll(args, optSpec{shortArg: "ecpswiIOqTVXxMmW"}); (o.has("U") || o.has("--unixsock")) && len(ops) > 0 {
		if !o.has("l", "--listen") && c.outsideCwd(ops[0].s) {
			c.add(RiskDangerous, KeyUserService, fmt.Sprintf("talks to a service through its Unix socket, outside this command (%s -U %s)", name, ops[0].s))
		}
		return // no network
	}
	if netcatLocal(args) {
		return // talks to this machine
	}
	switch {
	case name == "socat":
		c.add(RiskDangerous, KeyNetworkUpload, "relays local data or programs to the network (socat)")
	case cx.stdinFile != nil && !o.has("l", "--listen"):
		c.add(RiskDangerous, KeyNetworkUpload, fmt.Sprintf("sends a local file off the machine (%s < %s)", name, cx.stdinFile.s))
	case cx.stdin != nil && !o.has("l", "--listen"):
		c.add(RiskDangerous, KeyNetworkUpload, fmt.Sprintf("sends data off the machine (%s <<…)", name))
	}
}

// cloudCopy flags copies to buckets and remotes: aws s3 cp/sync/mv,
// gsutil cp/rsync/mv, rclone copy/sync/move, azcopy copy, gh gist create,
// gh release upload.
func cloudCopy(c *classifier, name string, args []arg, _ cmdCtx) {
	_, ops := parseAll(args, optSpec{shortArg: "pdR", longArg: []string{"profile", "region", "endpoint-url", "exclude", "include", "acl", "storage-class", "config", "repo", "desc", "description", "filename"}})
	if len(ops) == 0 {
		return
	}
	verb := 0
	if name == "aws" && len(ops) > 1 && ops[0].s == "s3" {
		verb = 1
	}
	if name == "gh" {
		if len(ops) > 1 && (ops[0].s == "gist" && ops[1].s == "create" || ops[0].s == "release" && ops[1].s == "upload") {
			c.add(RiskDangerous, KeyNetworkUpload, fmt.Sprintf("uploads local files (gh %s %s)", ops[0].s, ops[1].s))
		}
		return
	}
	switch ops[verb].s {
	case "cp", "sync", "mv", "rsync", "copy", "move", "copyto", "moveto":
	default:
		return
	}
	files := ops[verb+1:]
	if len(files) < 2 {
		return
	}
	dest, srcs := files[len(files)-1], files[:len(files)-1]
	if cloudURL(dest.s) && !allCloud(srcs) {
		c.add(RiskDangerous, KeyNetworkUpload, fmt.Sprintf("copies local files to a remote store (%s %s … %s)", name, ops[verb].s, dest.s))
	}
}

func cloudURL(s string) bool { return strings.Contains(s, "://") || remote(s) }

func allCloud(ops []arg) bool {
	for _, o := range ops {
		if !cloudURL(o.s) {
			return false
		}
	}
	return true
}

// optsOf is parseAll's options alone.
func optsOf(args []arg, sp optSpec) opts {
	o, _ := parseAll(args, sp)
	return o
}

// loopbackOnly reports whether every URL or host among ops names this
// machine (localhost, 127.0.0.0/8, ::1), and there is at least one.
func loopbackOnly(ops []arg) bool {
	if len(ops) == 0 {
		return false
	}
	for _, o := range ops {
		if !loopback(o.s) {
			return false
		}
	}
	return true
}

// loopback reports whether a URL or host names this machine.
func loopback(s string) bool {
	if _, rest, ok := strings.Cut(s, "://"); ok {
		s = rest
	}
	if i := strings.LastIndexByte(s, '@'); i >= 0 && !strings.Contains(s[:i], "/") {
		s = s[i+1:]
	}
	host := s
	if strings.HasPrefix(host, "[") {
		host, _, _ = strings.Cut(host[1:], "]")
	} else if i := strings.IndexAny(host, ":/?#"); i >= 0 {
		host = host[:i]
	}
	host = strings.ToLower(host)
	return host == "localhost" || strings.HasSuffix(host, ".localhost") || strings.HasPrefix(host, "127.") || host == "::1" || host == "0.0.0.0"
}

// netcatLocal reports whether a netcat's host is this machine.
func netcatLocal(args []arg) bool {
	_, ops := parseAll(args, optSpec{shortArg: "ecpswiIOqTVXxMmW"})
	return len(ops) > 0 && loopback(ops[0].s)
}
