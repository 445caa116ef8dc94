package risk

import (
	"fmt"
	"strings"
)

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
		case s == "--config-env" || strings.HasPrefix(s, "--config-env="):
			// --config-env=KEY=ENVVAR: the value comes from the environment.
			v, ok := strings.CutPrefix(s, "--config-env=")
			if !ok && i+1 < len(args) {
				i++
				v = args[i].s
			}
			key, _, _ := strings.Cut(v, "=")
			if gitCommandKey(strings.ToLower(key)) != "" {
				c.add(RiskDangerous, KeyExecOption, fmt.Sprintf("sets a git command from the environment (git --config-env %s)", v))
			}
			i++
			continue
		case strings.HasPrefix(s, "--exec-path="):
			c.add(RiskDangerous, KeyExecOption, fmt.Sprintf("runs git commands from another directory (git %s)", s))
			i++
			continue
		case s == "-C" || s == "--git-dir" || s == "--work-tree" || s == "--namespace" || s == "--super-prefix":
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
			c.add(RiskDangerous, KeyGitResetHard, "discards uncommitted changes (git reset --hard)")
		}
	case "clean":
		dry := o.has("n", "i") || longHas("dry-run", 3) || longHas("interactive", 3)
		switch {
		case dry:
		case o.has("f") || longHas("force", 3):
			c.add(RiskDangerous, KeyGitCleanForce, "deletes untracked files (git clean -f)")
		case c.gitState.cleanNoForce:
			c.add(RiskDangerous, KeyGitCleanForce, "deletes untracked files (git clean with clean.requireForce turned off)")
		}
	case "push":
		force := o.has("f") || longHas("force", 3) || longHas("force-with-lease", 7) || longHas("mirror", 2)
		del := o.has("d") || longHas("delete", 3) || longHas("prune", 3)
		for j, op := range ops {
			if strings.HasPrefix(op.s, "+") {
				force = true
			}
			if j > 0 && strings.HasPrefix(op.s, ":") {
				del = true
			}
		}
		c.gitPushTarget(o, ops)
		if force {
			c.add(RiskDangerous, KeyGitPushForce, "force push rewrites remote history (git push --force)")
		}
		if del {
			c.add(RiskDangerous, KeyGitPushDelete, "deletes remote branches or tags (git push --delete / :branch)")
		}
		if v, ok := o.get("--receive-pack", "--exec"); ok {
			c.execOption(v, "git push --receive-pack", nil)
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
			c.add(RiskDangerous, KeyGitDiscardChanges, "discards uncommitted changes (git checkout -- …)")
		}
		if o.has("B") {
			c.add(RiskDangerous, KeyGitBranchForceDelete, "resets a branch, creating it or moving it whatever it pointed at (git checkout -B)")
		}
	case "restore":
		staged := o.has("S") || longHas("staged", 2)
		worktree := o.has("W") || longHas("worktree", 2)
		if len(ops) > 0 && (!staged || worktree) {
			c.add(RiskDangerous, KeyGitDiscardChanges, "discards uncommitted changes (git restore)")
		}
	case "switch":
		if o.has("f") || longHas("force", 3) || longHas("discard-changes", 2) {
			c.add(RiskDangerous, KeyGitDiscardChanges, "discards uncommitted changes (git switch --discard-changes)")
		}
		if o.has("C") || longHas("force-create", 7) {
			c.add(RiskDangerous, KeyGitBranchForceDelete, "resets a branch, creating it or moving it whatever it pointed at (git switch -C)")
		}
	case "stash":
		if len(ops) > 0 && (ops[0].s == "drop" || ops[0].s == "clear") {
			c.add(RiskDangerous, KeyGitStashDrop, fmt.Sprintf("deletes stashed changes (git stash %s)", ops[0].s))
		}
		if (len(ops) == 0 || ops[0].s == "push" || ops[0].s == "save") &&
			(o.has("u", "a") || longHas("include-untracked", 3) || longHas("all", 2)) {
			c.add(RiskDangerous, KeyGitStashUntracked, "removes untracked files from the working tree into a stash (git stash -u)")
		}
	case "worktree":
		if len(ops) > 0 && ops[0].s == "remove" && (o.has("f") || longHas("force", 3)) {
			c.add(RiskDangerous, KeyGitWorktreeRemoveForce, "deletes a worktree with its uncommitted changes (git worktree remove --force)")
		}
	case "config":
		c.gitConfigWrite(rest)
	case "submodule":
		for j, a := range rest {
			if a.s == "foreach" {
				if cmd := rest[j+1:]; len(cmd) > 0 {
					for len(cmd) > 1 && strings.HasPrefix(cmd[0].s, "-") {
						cmd = cmd[1:] // --recursive, -q
					}
					c.nested(joinArgs(cmd))
				}
				break
			}
		}
	case "bisect":
		for j, a := range rest {
			if a.s == "run" {
				if j+1 < len(rest) {
					c.command(rest[j+1:], cmdCtx{})
				}
				break
			}
		}
	case "rebase", "filter-branch", "grep", "difftool", "mergetool", "clone", "fetch", "pull", "ls-remote", "archive":
		c.gitCommandOptions(sub, rest)
		if sub == "filter-branch" {
			c.add(RiskDangerous, KeyGitRefRewrite, "rewrites history (git filter-branch)")
		}
	case "branch":
		switch {
		case o.has("D") || (o.has("d") || longHas("delete", 3)) && (o.has("f") || longHas("force", 3)):
			c.add(RiskDangerous, KeyGitBranchForceDelete, "force-deletes a branch (git branch -D)")
		case o.has("f", "C") || longHas("force", 3) || o.has("M"):
			c.add(RiskDangerous, KeyGitBranchForceDelete, "force-moves or overwrites a branch (git branch -f / -M / -C)")
		}
	case "update-ref":
		c.add(RiskDangerous, KeyGitRefRewrite, "rewrites or deletes a ref directly (git update-ref)")
	case "reflog":
		if len(ops) > 0 && (ops[0].s == "expire" || ops[0].s == "delete") {
			c.add(RiskDangerous, KeyGitRefRewrite, fmt.Sprintf("destroys reflog entries, the way back to lost commits (git reflog %s)", ops[0].s))
		}
	case "gc":
		if v, ok := o.get("--prune"); ok && (v == "now" || v == "all") || longHas("prune", 3) && strings.Contains(joinArgs(rest), "=now") {
			c.add(RiskDangerous, KeyGitRefRewrite, "deletes unreachable commits at once (git gc --prune=now)")
		}
	case "prune", "filter-repo", "replace":
		if sub != "replace" || len(ops) > 0 || o.has("d", "f") {
			c.add(RiskDangerous, KeyGitRefRewrite, fmt.Sprintf("rewrites history or deletes unreachable objects (git %s)", sub))
		}
	case "tag":
		if o.has("d", "f") || longHas("delete", 3) || longHas("force", 3) {
			c.add(RiskDangerous, KeyGitRefRewrite, "deletes or moves a tag (git tag -d / -f)")
		}
	case "symbolic-ref":
		if o.has("d") || longHas("delete", 3) {
			c.add(RiskDangerous, KeyGitRefRewrite, "deletes a symbolic ref (git symbolic-ref -d)")
		}
	case "rm":
		if (o.has("r") || o.has("R")) && !longHas("cached", 3) && !o.has("n") && !longHas("dry-run", 3) {
			c.add(RiskDangerous, KeyGitRmRecursive, "deletes a tree from the working tree and the index (git rm -r)")
		}
	case "remote":
		if len(ops) > 0 {
			switch ops[0].s {
			case "add", "set-url", "rename":
				for _, op := range ops[1:] {
					c.gitState.remotes = append(c.gitState.remotes, op.s)
				}
				c.gitState.remoteChanged = true
			}
		}
	}
	for _, a := range rest {
		if strings.HasPrefix(a.s, "ext::") || strings.Contains(a.s, "=ext::") {
			c.add(RiskDangerous, KeyExecOption, fmt.Sprintf("runs the command of an ext:: URL (git %s %s)", sub, a.s))
		}
	}
}

// gitState is what git commands earlier in a command line changed, which
// later ones depend on.
type gitState struct {
	cleanNoForce  bool     // clean.requireForce was turned off
	remoteChanged bool     // a remote was added or its URL changed (remote add, set-url, remote.*.url, url.*.insteadOf)
	remotes       []string // the names (and URLs) involved
}

// gitPushTarget flags a push to a URL, or to a remote (or the default one)
// after the same command added a remote or changed a remote's URL: that
// sends the repository where nobody has looked.
func (c *classifier) gitPushTarget(o opts, ops []arg) {
	target, dyn := "", false
	if v, ok := o.get("--repo"); ok {
		target = v
	} else if len(ops) > 0 {
		target, dyn = ops[0].s, ops[0].dyn
	}
	switch {
	case dyn:
		c.add(RiskDangerous, KeyGitPushNewRemote, fmt.Sprintf("pushes to a repository named at run time (git push %s)", target))
	case target != "" && (strings.Contains(target, "://") || remote(target) || strings.HasPrefix(target, "/") || strings.HasPrefix(target, "~")):
		c.add(RiskDangerous, KeyGitPushNewRemote, fmt.Sprintf("pushes to a repository named by URL or path (git push %s)", target))
	case c.gitState.remoteChanged:
		c.add(RiskDangerous, KeyGitPushNewRemote, fmt.Sprintf("pushes after the same command added or changed a remote (%s)", strings.Join(c.gitState.remotes, ", ")))
	}
}

// gitConfig looks at one "git -c key=value": aliases are classified as
// the git command or (with !) the shell command they stand for, and
// settings that name commands run them.
func (c *classifier) gitConfig(kv string) {
	key, val, _ := strings.Cut(kv, "=")
	c.gitSetting(strings.ToLower(key), val, "git -c "+kv)
}

// gitStateSetting remembers the settings that change what later git
// commands of the same line do: clean.requireForce, remote URLs.
func (c *classifier) gitStateSetting(key, val, via string) {
	parts := strings.Split(key, ".")
	sec, last := parts[0], parts[len(parts)-1]
	switch {
	case key == "clean.requireforce":
		switch strings.ToLower(val) {
		case "false", "no", "off", "0", "":
			c.gitState.cleanNoForce = true
			c.add(RiskDangerous, KeyGitCleanForce, fmt.Sprintf("turns off git clean's safety, so that it deletes without -f (%s)", via))
		}
	case sec == "remote" && (last == "url" || last == "pushurl") || sec == "url" && (last == "insteadof" || last == "pushinsteadof"):
		c.gitState.remoteChanged = true
		c.gitState.remotes = append(c.gitState.remotes, val)
	case sec == "protocol" && last == "allow":
		v := strings.ToLower(val)
		if key == "protocol.ext.allow" && v != "never" || key == "protocol.allow" && (v == "always" || v == "user") {
			c.add(RiskDangerous, KeyExecOption, fmt.Sprintf("lets git run the commands of ext:: URLs (%s)", via))
		}
	}
}

// gitCommandKey says what kind of command a git setting names: "alias",
// "pager", "editor", "ssh", "credential", "fsmonitor", "cmd" (any
// command), "path" (a directory or file of code that cannot be analysed),
// or "" for settings that run nothing.
func gitCommandKey(key string) string {
	parts := strings.Split(key, ".")
	sec, last := parts[0], parts[len(parts)-1]
	switch {
	case sec == "alias" && len(parts) >= 2:
		return "alias"
	case key == "core.pager" || sec == "pager" && len(parts) == 2:
		return "pager"
	case key == "core.editor" || key == "sequence.editor":
		return "editor"
	case key == "core.sshcommand":
		return "ssh"
	case sec == "credential" && last == "helper":
		return "credential"
	case key == "core.fsmonitor":
		return "fsmonitor"
	case key == "core.hookspath" || key == "include.path" || sec == "includeif" && last == "path" || key == "init.templatedir":
		return "path"
	case key == "core.askpass" || key == "diff.external" || sec == "gpg" && last == "program" || key == "core.gitproxy" ||
		key == "uploadpack.packobjectshook" || sec == "filter" && (last == "clean" || last == "smudge" || last == "process") ||
		sec == "merge" && last == "driver" || sec == "diff" && (last == "textconv" || last == "command") ||
		sec == "remote" && (last == "uploadpack" || last == "receivepack") || key == "sendemail.sendmailcmd" ||
		(sec == "difftool" || sec == "mergetool" || sec == "browser" || sec == "man" || sec == "web") && (last == "cmd" || last == "path" || last == "browser") ||
		key == "core.alternaterefscommand":
		return "cmd"
	}
	return ""
}

// gitSetting classifies the value of a git setting that names a command.
func (c *classifier) gitSetting(key, val, via string) {
	c.gitStateSetting(key, val, via)
	switch gitCommandKey(key) {
	case "alias":
		if cmd, ok := strings.CutPrefix(val, "!"); ok {
			c.nested(cmd)
		} else {
			c.nested("git " + val) // an alias body is a git command line
		}
	case "pager":
		c.execOption(val, via, pagerCmds)
	case "editor":
		c.execOption(val, via, editorCmds)
	case "ssh":
		c.execOption(val, via, sshCmds)
	case "credential":
		if cmd, ok := strings.CutPrefix(val, "!"); ok {
			c.execOption(cmd, via, nil)
		} else if strings.ContainsAny(val, "/ ") {
			c.add(RiskDangerous, KeyExecOption, fmt.Sprintf("runs a program named in a setting (%s)", via))
		}
	case "fsmonitor":
		switch strings.ToLower(val) {
		case "", "true", "false", "yes", "no", "on", "off", "1", "0":
		default:
			c.add(RiskDangerous, KeyExecOption, fmt.Sprintf("runs a program named in a setting (%s)", via))
		}
	case "path":
		c.add(RiskDangerous, KeyExecOption, fmt.Sprintf("makes git run code that cannot be analysed (%s)", via))
	case "cmd":
		c.execOption(val, via, nil)
	}
}

// gitConfigWrite classifies "git config": writing an alias or a setting
// that names a command defines a command for later git runs.
func (c *classifier) gitConfigWrite(args []arg) {
	o, ops := parseAll(args, optSpec{shortArg: "f", longArg: []string{"file", "blob", "type", "default", "comment", "value", "url"}})
	for k := range o {
		switch k {
		case "l", "e", "--list", "--edit", "--get", "--get-all", "--get-regexp", "--get-urlmatch", "--get-color",
			"--get-colorbool", "--unset", "--unset-all", "--remove-section", "--rename-section":
			return
		}
	}
	var key, val string
	switch {
	case len(ops) >= 3 && ops[0].s == "set":
		key, val = ops[1].s, ops[2].s
	case len(ops) > 0 && (ops[0].s == "get" || ops[0].s == "list" || ops[0].s == "unset" || ops[0].s == "set" ||
		ops[0].s == "rename-section" || ops[0].s == "remove-section" || ops[0].s == "edit"):
		return
	case len(ops) >= 2:
		key, val = ops[0].s, ops[1].s
	default:
		return
	}
	lk := strings.ToLower(key)
	if gitCommandKey(lk) == "" {
		c.gitStateSetting(lk, val, "git config "+key)
		return
	}
	c.add(RiskDangerous, KeyGitConfigCommand, fmt.Sprintf("configures git to run a command (git config %s)", key))
	c.gitSetting(lk, val, "git config "+key)
}

// gitCommandOptions classifies the options of git commands that run a
// command: rebase --exec, filter-branch filters, grep -O, difftool -x,
// --upload-pack and friends.
func (c *classifier) gitCommandOptions(sub string, args []arg) {
	for i := 0; i < len(args); i++ {
		s := args[i].s
		if s == "--" {
			return
		}
		name, val, hasVal := strings.Cut(s, "=")
		value := func() string {
			if hasVal {
				return val
			}
			if i+1 < len(args) {
				i++
				return args[i].s
			}
			return ""
		}
		switch {
		case sub == "rebase" && (name == "--exec" || name == "-x"):
			c.nested(value())
		case sub == "rebase" && len(s) > 2 && s[0] == '-' && s[1] != '-' && strings.ContainsRune(s, 'x'):
			if j := strings.IndexByte(s, 'x'); j == len(s)-1 {
				c.nested(value())
			} else {
				c.nested(s[j+1:])
			}
		case sub == "filter-branch" && strings.HasSuffix(name, "-filter") && name != "--subdirectory-filter":
			c.nested(value())
		case sub == "grep" && (name == "--open-files-in-pager" || strings.HasPrefix(s, "-O")):
			v := strings.TrimPrefix(s, "-O")
			if name == "--open-files-in-pager" {
				v = val
			}
			if v != "" {
				c.execOption(v, "git grep -O", pagerCmds)
			}
		case (sub == "difftool" || sub == "mergetool") && (name == "--extcmd" || name == "-x"):
			v := value()
			c.execOption(v, "git "+sub+" --extcmd "+v, nil)
		case name == "--upload-pack" || name == "--exec" || sub == "clone" && name == "-u":
			v := value()
			c.execOption(v, "git "+sub+" "+name+" "+v, nil)
		}
	}
}

func init() {
	register(func(c *classifier, _ string, args []arg, _ cmdCtx) { c.git(args) }, "git")
}
