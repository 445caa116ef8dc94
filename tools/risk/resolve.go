package risk

import (
	"path"
	"strings"
)

// optSpec describes a command's options well enough to find its operands.
type optSpec struct {
	shortArg string   // short options that take a value (-u root, -uroot)
	longArg  []string // long options that take a value when given without '=' (also unique prefixes)
	dashOpt  bool     // a lone "-" is an option (env -)
}

// opts maps an option to its value: short options by their letter ("u"),
// long ones with their dashes ("--user").
type opts map[string]string

func (o opts) has(keys ...string) bool {
	for _, k := range keys {
		if _, ok := o[k]; ok {
			return true
		}
	}
	return false
}

func (o opts) get(keys ...string) (string, bool) {
	for _, k := range keys {
		if v, ok := o[k]; ok {
			return v, true
		}
	}
	return "", false
}

// takesValue reports whether long option name (without dashes) takes a
// value, accepting unique-prefix abbreviations as GNU getopt does.
func (sp optSpec) takesValue(name string) bool {
	for _, l := range sp.longArg {
		if strings.HasPrefix(l, name) && name != "" {
			return true
		}
	}
	return false
}

// parseOpts reads the options in front of the first operand (the way
// wrappers such as sudo and timeout stop at their command). dyn is set
// when an argument begins with a run-time expansion, so that where the
// options end cannot be known.
func parseOpts(args []arg, sp optSpec) (o opts, rest []arg, dyn bool) {
	o = opts{}
	i := 0
	for i < len(args) {
		a := args[i]
		s := a.s
		if a.dynStart {
			return o, args[i:], true
		}
		if s == "--" {
			i++
			break
		}
		if s == "-" && sp.dashOpt {
			o["-"] = ""
			i++
			continue
		}
		if len(s) < 2 || s[0] != '-' {
			break
		}
		i += readOpt(args, i, sp, func(k, v string) { o[k] = v })
	}
	return o, args[i:], false
}

// parseAll reads options anywhere before "--" (GNU argument permutation)
// and returns the operands. An option given twice keeps its last value;
// eachOpt sees every one.
func parseAll(args []arg, sp optSpec) (o opts, operands []arg) {
	o = opts{}
	operands = eachOpt(args, sp, func(k, v string) { o[k] = v })
	return o, operands
}

// eachOpt calls f for every option in args, in order, with its key (a
// short option's letter "F", a long option with its dashes "--form") and
// value, reading options anywhere before "--" as parseAll does, and
// returns the operands.
func eachOpt(args []arg, sp optSpec, f func(key, val string)) (operands []arg) {
	for i := 0; i < len(args); {
		s := args[i].s
		if s == "--" {
			operands = append(operands, args[i+1:]...)
			break
		}
		if len(s) < 2 || s[0] != '-' || args[i].dynStart {
			operands = append(operands, args[i])
			i++
			continue
		}
		i += readOpt(args, i, sp, f)
	}
	return operands
}

// readOpt reads the option at args[i], calls f for each option it holds
// (a cluster -abc holds three) and returns how many arguments it used (1,
// or 2 when its value is the next argument).
func readOpt(args []arg, i int, sp optSpec, f func(key, val string)) int {
	s := args[i].s
	if strings.HasPrefix(s, "--") {
		name, val, hasVal := strings.Cut(s[2:], "=")
		if !hasVal && sp.takesValue(name) && i+1 < len(args) {
			f("--"+name, args[i+1].s)
			return 2
		}
		f("--"+name, val)
		return 1
	}
	for j := 1; j < len(s); j++ {
		ch := s[j]
		if strings.IndexByte(sp.shortArg, ch) >= 0 {
			if val := s[j+1:]; val != "" {
				f(string(ch), val)
				return 1
			}
			if i+1 < len(args) {
				f(string(ch), args[i+1].s)
				return 2
			}
			f(string(ch), "")
			return 1
		}
		f(string(ch), "")
	}
	return 1
}

// commandName resolves the program a command word names: a leading
// backslash (\rm) is dropped and a path is reduced to its base name
// (/bin/rm is rm).
func commandName(s string) string {
	s = strings.TrimLeft(s, `\`)
	if strings.Contains(s, "/") && strings.TrimRight(s, "/") != "" {
		s = path.Base(s)
	}
	return s
}

// wrapper describes a command that runs another command given in its
// arguments.
type wrapper struct {
	optSpec
	positional int             // operands before the wrapped command (timeout DURATION)
	assigns    bool            // NAME=VALUE words before the command (env)
	elevates   bool            // runs the command with other privileges
	sub        map[string]bool // the subcommand that runs a command (poetry run, bundle exec); others run none
}

var wrappers = map[string]wrapper{
	"sudo": {optSpec: optSpec{shortArg: "ugCDprtTU", longArg: []string{
		"user", "group", "close-from", "chdir", "prompt", "role", "type", "command-timeout", "other-user", "host"}}, elevates: true},
	"doas":     {optSpec: optSpec{shortArg: "uC"}, elevates: true},
	"pkexec":   {optSpec: optSpec{longArg: []string{"user"}}, elevates: true},
	"run0":     {optSpec: optSpec{shortArg: "uDg", longArg: []string{"user", "group", "chdir", "unit", "property", "description", "slice", "nice", "machine", "setenv"}}, elevates: true},
	"su":       {optSpec: optSpec{shortArg: "cgGsw", longArg: []string{"command", "session-command", "group", "supp-group", "shell", "whitelist-environment"}}, elevates: true},
	"runuser":  {optSpec: optSpec{shortArg: "cgGswu", longArg: []string{"command", "session-command", "group", "supp-group", "shell", "whitelist-environment", "user"}}, elevates: true},
	"nsenter":  {optSpec: optSpec{shortArg: "tSG", longArg: []string{"target", "setuid", "setgid", "user-parent"}}, elevates: true},
	"env":      {optSpec: optSpec{shortArg: "uCS", longArg: []string{"unset", "chdir", "split-string"}, dashOpt: true}, assigns: true},
	"xargs":    {optSpec: optSpec{shortArg: "adEILnPs", longArg: []string{"arg-file", "delimiter", "max-args", "max-procs", "max-chars", "process-slot-var"}}},
	"nice":     {optSpec: optSpec{shortArg: "n", longArg: []string{"adjustment"}}},
	"nohup":    {},
	"timeout":  {optSpec: optSpec{shortArg: "sk", longArg: []string{"signal", "kill-after"}}, positional: 1},
	"command":  {},
	"exec":     {optSpec: optSpec{shortArg: "a"}},
	"builtin":  {},
	"time":     {optSpec: optSpec{shortArg: "fo", longArg: []string{"format", "output"}}},
	"stdbuf":   {optSpec: optSpec{shortArg: "ioe", longArg: []string{"input", "output", "error"}}},
	"ionice":   {optSpec: optSpec{shortArg: "cnpPu", longArg: []string{"class", "classdata", "pid", "pgid", "uid"}}},
	"setsid":   {},
	"unbuffer": {},
	"busybox":  {},
	"toybox":   {},
	"chroot":   {optSpec: optSpec{longArg: []string{"userspec", "groups"}}, positional: 1},
	"taskset":  {positional: 1},
	"flock":    {optSpec: optSpec{shortArg: "wEc", longArg: []string{"timeout", "conflict-exit-code", "command"}}, positional: 1},
	"watch":    {optSpec: optSpec{shortArg: "n", longArg: []string{"interval"}}},
	"ssh":      {optSpec: optSpec{shortArg: "BbcDEeFIiJLlmOoPpQRSWw"}},
	"chrt":     {optSpec: optSpec{shortArg: "TPD", longArg: []string{"sched-runtime", "sched-period", "sched-deadline"}}, positional: 1},
	"strace": {optSpec: optSpec{shortArg: "abeEIoOpPsSuUX", longArg: []string{"output", "attach", "user", "env", "trace",
		"signal", "status", "string-limit", "columns", "trace-path", "summary-sort-by", "summary-columns", "abbrev",
		"verbose", "raw", "read", "write", "inject", "fault", "trace-fds", "kvm", "quiet", "decode-fds", "const-print-style"}}},
	"ltrace":   {optSpec: optSpec{shortArg: "aADeFlnopsuwxX", longArg: []string{"output", "align", "library", "indent", "config"}}},
	"unshare":  {optSpec: optSpec{shortArg: "SGRw", longArg: []string{"setuid", "setgid", "root", "wd", "propagation", "map-user", "map-group", "map-users", "map-groups", "monotonic", "boottime", "setgroups"}}},
	"numactl":  {optSpec: optSpec{shortArg: "iwpPmNCSfLoMI", longArg: []string{"interleave", "weighted-interleave", "preferred", "preferred-many", "membind", "cpunodebind", "physcpubind", "shm", "file", "length", "offset", "shmmode", "shmid"}}},
	"prlimit":  {optSpec: optSpec{shortArg: "po", longArg: []string{"pid", "output"}}},
	"firejail": {},
	"proot":    {optSpec: optSpec{shortArg: "rbmwqkivRS", longArg: []string{"rootfs", "bind", "mount", "cwd", "pwd", "qemu", "kernel-release", "change-id", "verbose"}}},
	"fakeroot": {optSpec: optSpec{shortArg: "lsib", longArg: []string{"lib", "faked"}}},
	"flatpak-spawn": {optSpec: optSpec{longArg: []string{"env", "unset-env", "forward-fd", "directory", "app-path", "usr-path",
		"sandbox-expose", "sandbox-expose-ro", "sandbox-expose-path", "sandbox-expose-path-ro", "sandbox-flag", "sandbox-a11y-own-name"}}},
	"setpriv": {optSpec: optSpec{longArg: []string{"reuid", "regid", "ruid", "euid", "rgid", "egid", "groups", "inh-caps", "ambient-caps",
		"bounding-set", "securebits", "pdeathsig", "selinux-label", "apparmor-profile", "landlock-access", "landlock-rule"}}},
	"valgrind":         {},
	"catchsegv":        {},
	"dbus-run-session": {optSpec: optSpec{longArg: []string{"config-file", "dbus-daemon"}}},
	"xvfb-run":         {optSpec: optSpec{shortArg: "efnpsw", longArg: []string{"error-file", "auth-file", "server-num", "xauth-protocol", "server-args", "wait"}}},
	"faketime":         {optSpec: optSpec{longArg: []string{"date-prog"}}, positional: 1},
	"torsocks":         {optSpec: optSpec{shortArg: "upaP", longArg: []string{"user", "pass", "address", "port"}}},
	"proxychains":      {optSpec: optSpec{shortArg: "f"}},
	"proxychains4":     {optSpec: optSpec{shortArg: "f"}},
	"tsocks":           {},
	"caffeinate":       {optSpec: optSpec{shortArg: "tw"}},
	"systemd-inhibit":  {optSpec: optSpec{longArg: []string{"what", "who", "why", "mode"}}},
	"cgexec":           {optSpec: optSpec{shortArg: "g"}},
	"tini":             {optSpec: optSpec{shortArg: "pe"}},
	"dumb-init":        {optSpec: optSpec{shortArg: "r", longArg: []string{"rewrite"}}},
	"entr":             {},
	"script":           {optSpec: optSpec{shortArg: "cEIOBTmo", longArg: []string{"command", "echo", "log-in", "log-out", "log-io", "log-timing", "logging-format", "output-limit"}}},
	"sg":               {},
	"systemd-run": {optSpec: optSpec{shortArg: "upEHM", longArg: []string{"unit", "property", "setenv", "host", "machine", "description",
		"slice", "uid", "gid", "nice", "working-directory", "on-active", "on-boot", "on-startup", "on-unit-active", "on-unit-inactive",
		"on-calendar", "path-property", "socket-property", "timer-property", "service-type", "background"}}},
	"perf": {optSpec: optSpec{shortArg: "eptoGCrxIMFcm", longArg: []string{"event", "pid", "tid", "output", "cgroup", "cpu",
		"repeat", "field-separator", "interval-print", "metrics", "freq", "count", "call-graph", "mmap-pages"}}, sub: set("stat", "record", "trace")},
	// Tools that run a command in a project environment: NAME SUB [options] command.
	"bundle":     {sub: set("exec")},
	"poetry":     {sub: set("run")},
	"pipenv":     {sub: set("run")},
	"pdm":        {sub: set("run")},
	"rye":        {sub: set("run")},
	"uv":         {optSpec: optSpec{shortArg: "p", longArg: []string{"with", "with-editable", "with-requirements", "python", "project", "directory", "env-file", "extra", "group", "only-group", "package", "index", "default-index", "index-url", "extra-index-url", "find-links", "config-file", "cache-dir"}}, sub: set("run")},
	"conda":      {optSpec: optSpec{shortArg: "np", longArg: []string{"name", "prefix", "cwd"}}, sub: set("run")},
	"mamba":      {optSpec: optSpec{shortArg: "np", longArg: []string{"name", "prefix", "cwd"}}, sub: set("run")},
	"micromamba": {optSpec: optSpec{shortArg: "np", longArg: []string{"name", "prefix", "cwd"}}, sub: set("run")},
	"mise":       {optSpec: optSpec{shortArg: "C", longArg: []string{"cd", "jobs"}}, sub: set("exec", "x")},
	"asdf":       {sub: set("exec")},
	"rbenv":      {sub: set("exec")},
	"pyenv":      {sub: set("exec")},
	"direnv":     {sub: set("exec"), positional: 1},
	"doppler":    {optSpec: optSpec{shortArg: "pc", longArg: []string{"project", "config", "token"}}, sub: set("run")},
	"op":         {optSpec: optSpec{longArg: []string{"env-file", "account"}}, sub: set("run")},
	"aws-vault":  {optSpec: optSpec{shortArg: "d", longArg: []string{"duration", "region", "mfa-token"}}, sub: set("exec"), positional: 1},
}

// resolved is a command line with its wrappers peeled off.
type resolved struct {
	name     string   // base name of the command that finally runs; "" if none
	word     string   // the word that names it, as written (./s.sh)
	args     []arg    // its arguments
	dynamic  bool     // the name (or where it starts) is computed at run time
	dynText  string   // the rendered computed name, for the reason
	elevated []string // wrappers that change privileges (sudo, doas, …)
	xargs    bool     // the command runs under xargs, with arguments read from input
	shellSrc []string // strings the wrappers hand to a shell (sudo -s, su -c, watch, flock -c, ssh host cmd)
	writes   []arg    // files the wrappers write (strace -o, time -o)
	execs    []string // programs the wrappers run that cannot be analysed (ssh -o PKCS11Provider=…), for the reason
	scripts  []arg    // files the wrappers read as configuration or commands (ssh -F)
	detached string   // a wrapper that runs the command outside this session (systemd-run)
	envs     []arg    // NAME=VALUE words set by env
	exhausts string   // a wrapper setting that may exhaust the machine (xargs -P0)
	// remote is set when the command runs on another machine (ssh host
	// cmd), which receives what the command reads; remoteName names it.
	remote     bool
	remoteName string
	// userService names a wrapper that has a service of the user's run the
	// command outside this command and its sandbox (flatpak-spawn --host).
	userService string
}

// resolve peels wrappers (sudo, env, xargs, timeout, …) off a command line.
func resolve(args []arg) resolved {
	var r resolved
	for hops := 0; hops < 32 && len(args) > 0; hops++ {
		a := args[0]
		if a.dyn {
			r.dynamic, r.dynText = true, a.s
			return r
		}
		name := commandName(a.s)
		if strings.ContainsAny(name, "*?") || strings.Contains(name, "[") && name != "[" && name != "[[" {
			r.dynamic, r.dynText = true, a.s
			return r
		}
		w, ok := wrappers[name]
		if !ok {
			r.name, r.args, r.word = name, args[1:], a.s
			return r
		}
		if w.elevates {
			r.elevated = append(r.elevated, name)
		}
		if w.sub != nil {
			// poetry run CMD: skip the options in front of the subcommand.
			_, rest, dyn := parseOpts(args[1:], w.optSpec)
			if dyn {
				r.dynamic, r.dynText = true, rest[0].s
				return r
			}
			if len(rest) == 0 || !w.sub[rest[0].s] {
				r.name, r.args, r.word = name, args[1:], a.s
				return r
			}
			args = rest // the subcommand stands in for the wrapper's name
		}
		if name == "su" || name == "runuser" && !runuserCommand(args[1:], w.optSpec) {
			// su [options] [-] [user [args]]: options may follow the user.
			o, _ := parseAll(args[1:], w.optSpec)
			if src, ok := o.get("c", "--command", "--session-command"); ok {
				r.shellSrc = append(r.shellSrc, src)
			}
			return r
		}
		o, rest, dyn := parseOpts(args[1:], w.optSpec)
		if dyn {
			r.dynamic, r.dynText = true, rest[0].s
			return r
		}
		switch name {
		case "sudo", "doas":
			if o.has("s", "i", "--shell", "--login") {
				if len(rest) > 0 {
					r.shellSrc = append(r.shellSrc, joinArgs(rest))
				}
				return r
			}
		case "env":
			if src, ok := o.get("S", "--split-string"); ok {
				rest = append(renderSplit(src), rest...)
			}
		case "xargs":
			r.xargs = true
			if v, ok := o.get("P", "--max-procs"); ok && strings.TrimLeft(v, "0") == "" {
				r.exhausts = "xargs -P " + v
			}
		case "command":
			if o.has("v", "V") {
				return r
			}
		case "ionice":
			if o.has("p", "P", "u", "--pid", "--pgid", "--uid") {
				return r
			}
		case "taskset":
			if o.has("p", "--pid") {
				return r
			}
		case "flock":
			if src, ok := o.get("c", "--command"); ok {
				r.shellSrc = append(r.shellSrc, src)
				return r
			}
		case "ssh":
			// ssh [options] host [command]: the remote shell parses the
			// command, which is classified as if it ran here.
			sshOptions(args[1:], w.optSpec, &r)
			r.remote, r.remoteName = true, name
			if len(rest) > 1 {
				r.shellSrc = append(r.shellSrc, joinArgs(rest[1:]))
			}
			return r
		case "strace", "ltrace", "time":
			if f, ok := o.get("o", "--output"); ok {
				r.writes = append(r.writes, arg{s: f})
			}
		case "chrt":
			if o.has("p", "--pid", "m", "--max") {
				return r
			}
		case "prlimit":
			if o.has("p", "--pid") {
				return r
			}
		case "script":
			// script [-c command] [file]; BSD: script [file [command …]].
			if len(rest) > 0 {
				r.writes = append(r.writes, rest[0])
			}
			src, ok := o.get("c", "--command")
			if ok {
				r.shellSrc = append(r.shellSrc, src)
			}
			if ok || len(rest) < 2 {
				return r
			}
			rest = rest[1:]
		case "entr":
			if o.has("s") {
				if len(rest) > 0 {
					r.shellSrc = append(r.shellSrc, rest[0].s)
				}
				return r
			}
		case "sg":
			// sg GROUP [-c] COMMAND: the command is a string for /bin/sh.
			if len(rest) > 1 {
				cmd := rest[1:]
				if cmd[0].s == "-c" {
					cmd = cmd[1:]
				}
				r.shellSrc = append(r.shellSrc, joinArgs(cmd))
			}
			return r
		case "flatpak-spawn":
			if o.has("--host") {
				r.userService = name + " --host"
			}
		case "systemd-run":
			if !o.has("--user") {
				r.elevated = append(r.elevated, name)
			}
			if !o.has("--scope") {
				r.detached = name
			}
			if o.has("S", "--shell") {
				return r
			}
		case "watch":
			if !o.has("x", "--exec") {
				if len(rest) > 0 {
					r.shellSrc = append(r.shellSrc, joinArgs(rest))
				}
				return r
			}
		}
		if w.assigns {
			for len(rest) > 0 && isAssignment(rest[0].s) {
				r.envs = append(r.envs, rest[0])
				rest = rest[1:]
			}
		}
		for n := 0; n < w.positional && len(rest) > 0; n++ {
			rest = rest[1:]
		}
		if name == "flock" && len(rest) > 1 && (rest[0].s == "-c" || rest[0].s == "--command") {
			r.shellSrc = append(r.shellSrc, rest[1].s)
			return r
		}
		args = rest
	}
	return r
}

// runuserCommand reports whether runuser is given -u USER, the form that
// runs a command (runuser -u USER [--] command) rather than a -c string.
func runuserCommand(args []arg, sp optSpec) bool {
	o, _, _ := parseOpts(args, sp)
	return o.has("u", "--user")
}

// sshOptions looks at ssh's -o options (and -F): ProxyCommand,
// LocalCommand, RemoteCommand and KnownHostsCommand are shell commands,
// which are classified; provider libraries are programs that cannot be.
func sshOptions(args []arg, sp optSpec, r *resolved) {
	for i := 0; i < len(args); i++ {
		s := args[i].s
		if len(s) < 2 || s[0] != '-' || s == "--" || args[i].dynStart {
			return
		}
		for j := 1; j < len(s); j++ {
			ch := s[j]
			if strings.IndexByte(sp.shortArg, ch) < 0 {
				continue
			}
			val := s[j+1:]
			if val == "" && i+1 < len(args) {
				i++
				val = args[i].s
			}
			switch ch {
			case 'o':
				sshOption(val, r)
			case 'F':
				r.scripts = append(r.scripts, arg{s: val})
			}
			break
		}
	}
}

// sshOption classifies one ssh -o KEY=VALUE (or "KEY VALUE").
func sshOption(kv string, r *resolved) {
	kv = strings.TrimLeft(kv, " \t")
	i := strings.IndexAny(kv, "= \t")
	if i < 0 {
		return
	}
	key, val := strings.ToLower(kv[:i]), strings.TrimLeft(kv[i:], "= \t")
	if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
		val = val[1 : len(val)-1]
	}
	switch key {
	case "proxycommand", "localcommand", "remotecommand", "knownhostscommand":
		if val != "none" && val != "-" {
			r.shellSrc = append(r.shellSrc, val)
			if key != "remotecommand" && !harmless(val, sshCmds) {
				r.execs = append(r.execs, "ssh -o "+kv)
			}
		}
	case "pkcs11provider", "securitykeyprovider", "include":
		r.execs = append(r.execs, "ssh -o "+kv)
	}
}

// renderSplit splits env -S's string into arguments, roughly as the shell
// would (the classifier errs on the side of finding commands).
func renderSplit(s string) []arg {
	var out []arg
	for _, f := range strings.Fields(s) {
		out = append(out, arg{s: strings.Trim(f, `'"`)})
	}
	return out
}

// isAssignment reports whether s looks like NAME=value.
func isAssignment(s string) bool {
	name, _, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c != '_' && !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') && !(i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// flagScan reads a coreutils-style command line (rm, chmod, chown):
// options and operands in any order, up to "--". long gets a long
// option's name (without dashes), its value and whether it had one, and
// returns whether the next argument is its value; short gets an option
// cluster and returns false when the word is an operand after all
// (chmod -w is a mode). A word that begins with a run-time expansion is
// an operand.
func flagScan(args []arg, long func(name, val string, hasVal bool) (next bool), short func(a arg) (isOpt bool)) (ops []arg) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		s := a.s
		switch {
		case a.dynStart:
			ops = append(ops, a)
		case s == "--":
			return append(ops, args[i+1:]...)
		case strings.HasPrefix(s, "--"):
			name, val, hasVal := strings.Cut(s[2:], "=")
			if long(name, val, hasVal) && !hasVal {
				i++
			}
		case len(s) > 1 && s[0] == '-' && short(a):
		default:
			ops = append(ops, a)
		}
	}
	return ops
}

// clusterValue returns the value of the short option at index j of the
// cluster args[*i] (-fFILE, -f FILE): the rest of the cluster, or the next
// argument, which it consumes by advancing *i.
func clusterValue(args []arg, i *int, j int) arg {
	a := args[*i]
	if v := a.s[j+1:]; v != "" {
		return arg{s: v, dyn: a.dyn, word: a.word}
	}
	if *i+1 < len(args) {
		*i++
		return args[*i]
	}
	return arg{}
}
