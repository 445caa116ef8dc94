//go:build linux && sandboxlimits

package sandbox

// Known limits of the sandbox's view (README "Security model", docs/protocol.md
// E3): attacks of the issue-22 review round that still work and are written
// down rather than fixed, each as the test that shows it. They fail; they
// are built only with -tags sandboxlimits, so that whoever closes a limit
// moves its test back into the suite:
//
//	go test -tags sandboxlimits -run 'TestAttackView' ./sandbox/
//
// - Git reads files of .git that a command can create or that the person's
//   own git replaces: .git/commondir, a new repository in the cwd, a
//   submodule's repository and its gitlink in the index; and a .git/config
//   (or a credential file of the home) rewritten by rename while a command
//   runs loses its cover in that command. Closing them means a read-only
//   .git (as Codex does), which takes git commits away from the model.
// - A command whose view was built before another daemon's home appeared in
//   the shared workspace can move that home aside (no symlink needed); the
//   commands of that daemon's sessions then find nothing at its path to
//   cover while it is away.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAttackViewGitCommondir (FAILS): .git/config and .git/hooks are
// read-only, but the rest of .git is writable, and git reads the config
// and the hooks of the common directory named by .git/commondir (for any
// git directory, not only a worktree's). The command copies the
// repository into .evil with a config of its own and writes
// "../.evil" into .git/commondir: the person's next `git status` in the
// workspace runs core.fsmonitor outside the sandbox (persistence, code
// execution as the daemon's user). What should hold: the cwd's
// repository configuration cannot be redirected (git's config of the
// workspace is what it was).
// evilRepo is shell that makes, in the workspace, a copy of the
// repository's common directory whose config runs a command on the
// person's next git status (core.fsmonitor) and whose hooks run on
// commit.
const evilRepo = `mkdir .evil && cp -r .git/objects .git/refs .git/HEAD .evil/ && mkdir .evil/hooks &&
printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "touch /tmp/PWNED-fsmonitor; false"\n' > .evil/config &&
printf '#!/bin/sh\ntouch /tmp/PWNED-hook\n' > .evil/hooks/pre-commit && chmod +x .evil/hooks/pre-commit`

func TestAttackViewGitCommondir(t *testing.T) {
	l := newLayout(t)
	gitRepo(t, l.work)
	s := l.spec(ModeWorkspaceWrite, l.work)
	out, code := run(t, s, evilRepo+` && echo ../.evil > .git/commondir`)
	t.Logf("command: %d %s", code, out)
	if got := gitConfig(l.work, "core.fsmonitor"); got != "" {
		t.Errorf("the person's git in the workspace now runs core.fsmonitor %q (from .git/commondir)", got)
	}
	if got := gitConfig(l.work, "core.hooksPath"); got != "" {
		t.Errorf("core.hooksPath %q", got)
	}
}

// TestAttackViewGitCreatedInCwd (FAILS): a session whose cwd is a
// subdirectory of a repository (monorepo/pkg) has no .git of its own to
// freeze, so the command makes one (`git init`, a config with
// core.fsmonitor); the person's next git command in that directory, the
// session's own cwd, runs it outside the sandbox. What should hold: no
// .git can be created at the cwd (or a writable root) either.
func TestAttackViewGitCreatedInCwd(t *testing.T) {
	l := newLayout(t)
	gitRepo(t, l.work)
	pkg := filepath.Join(l.work, "pkg")
	os.Mkdir(pkg, 0o755)
	s := l.spec(ModeWorkspaceWrite, pkg)
	out, code := run(t, s, `git init -q . && git config core.fsmonitor "touch /tmp/PWNED; false"`)
	t.Logf("command: %d %s", code, out)
	if got := gitConfig(pkg, "core.fsmonitor"); got != "" {
		t.Errorf("the person's git in the session's cwd now runs core.fsmonitor %q", got)
	}
}

// TestAttackViewGitConfigReplacedOutside (FAILS): .git/config is a
// read-only bind on the file's dentry; git writes its config by
// renaming config.lock over it, so when the person runs any
// config-writing git command (`git config`, `git push -u`, `git remote
// add`, `git checkout --track`) while a command runs, the kernel detaches
// the bind in the command's namespace and the command, still running
// (a long test run, a watcher), writes core.fsmonitor into the real
// .git/config: the person's next `git status` runs it outside the
// sandbox. The same detaching uncovers the home's file credential
// stores (~/.git-credentials, ~/.npmrc, ~/.vault-token are rewritten by
// rename too) for a running command. What should hold: .git/config
// stays read-only for the whole command.
func TestAttackViewGitConfigReplacedOutside(t *testing.T) {
	l := newLayout(t)
	gitRepo(t, l.work)
	s := l.spec(ModeWorkspaceWrite, l.work)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		exec.Command("git", "-C", l.work, "config", "user.name", "person").Run()
	}()
	out, code := run(t, s, `for i in $(seq 50); do git config core.fsmonitor "touch /tmp/PWNED; false" 2>/dev/null && echo WRITTEN && break; sleep 0.1; done; true`)
	t.Logf("command: %d %s", code, out)
	if got := gitConfig(l.work, "core.fsmonitor"); got != "" {
		t.Errorf("a running command wrote core.fsmonitor %q into .git/config after the person's git replaced it", got)
	}
}

// TestAttackViewCredentialFileReplaced (FAILS): a credential store that
// is a file (~/.git-credentials, ~/.npmrc, ~/.netrc, ~/.vault-token) is
// covered by a bind on its dentry; the person's tool rewrites it by
// rename (git credential-store's lock file, npm's write-file-atomic,
// `vault login`) while a command runs, the bind is detached, and the
// running command reads the new credentials. What should hold: the
// store stays out of the view for the whole command.
func TestAttackViewCredentialFileReplaced(t *testing.T) {
	l := newLayout(t)
	home := filepath.Join(l.root, "user")
	os.Mkdir(home, 0o700)
	creds := filepath.Join(home, ".git-credentials")
	os.WriteFile(creds, []byte("https://u:OLD-PAT@github.com\n"), 0o600)
	s := l.spec(ModeWorkspaceWrite, l.work)
	s.Home = home
	go func() {
		time.Sleep(1500 * time.Millisecond)
		os.WriteFile(creds+".lock", []byte("https://u:NEW-PAT@github.com\n"), 0o600)
		os.Rename(creds+".lock", creds)
	}()
	out, _ := run(t, s, `cat "`+creds+`"; sleep 3; cat "`+creds+`"; true`)
	if strings.Contains(out, "PAT@") {
		t.Errorf("a running command read the credential store after it was replaced: %q", out)
	}
}

// TestAttackViewGitSubmoduleRecursion (FAILS): the known limit says a
// repository nested in the cwd keeps its .git/config writable; but the
// command also writes the cwd repository's index (writable in .git) and
// adds the nested repository as a submodule (a gitlink): the person's
// next `git status` in the cwd itself recurses into it and runs the
// nested core.fsmonitor outside the sandbox, without the person ever
// entering the nested directory. What should hold: a git command in the
// session's cwd runs nothing the sandboxed command configured.
func TestAttackViewGitSubmoduleRecursion(t *testing.T) {
	l := newLayout(t)
	gitRepo(t, l.work)
	mark := filepath.Join(l.root, "PWNED-submodule")
	s := l.spec(ModeWorkspaceWrite, l.work)
	out, code := run(t, s, `mkdir sub && cd sub && git init -q && git -c user.name=a -c user.email=a@a commit -q --allow-empty -m x &&
git config core.fsmonitor "touch `+mark+`; false" && cd .. && git update-index --add --cacheinfo 160000,$(git -C sub rev-parse HEAD),sub`)
	t.Logf("command: %d %s", code, out)
	exec.Command("git", "-C", l.work, "status").Run() // the person, outside the sandbox
	if _, err := os.Stat(mark); err == nil {
		t.Error("the person's git status in the session's cwd ran a command the sandboxed command configured (nested submodule's core.fsmonitor)")
	}
}

// TestAttack2ProtectedDirMovedAside (FAILS): a protected directory is
// covered at its path as it is when the view is planned; one that is
// not there then (a missing path, a parent missing: "nothing there to
// protect") is not looked for anywhere else, and cover's pinned chain
// returns nil on ENOENT too. Session A's command runs in workspace W; a
// second daemon's home is then made in it (the person's `make run`
// making ./x/.home, registered while A runs: A's view, planned before,
// pins nothing of it) and A's command keeps swapping W/x and W/y
// (rename, no symlink). Every command of session B in W (whose spec
// protects W/x/.home) planned while the home sits at W/y/.home gets a
// view with that home uncovered and writable: it reads the other
// daemon's token and rewrites its config (approvals: auto). What should
// hold: a protected directory moved within a writable location while a
// view is made is covered or nothing runs.
func TestAttack2ProtectedDirMovedAside(t *testing.T) {
	l := newLayout(t)
	x := filepath.Join(l.work, "x")
	dh := filepath.Join(x, ".home")
	os.MkdirAll(dh, 0o700)
	os.WriteFile(filepath.Join(dh, "daemon.json"), []byte(`{"token":"OTHER-DAEMON-TOKEN"}`), 0o600)
	// Session A: its daemon does not know the second home (yet).
	a := l.spec(ModeWorkspaceWrite, l.work)
	a.TempDir = filepath.Join(l.root, "tmpA")
	os.Mkdir(a.TempDir, 0o700)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ac, err := a.Command(ctx, `end=$(( $(date +%s) + 6 )); while [ $(date +%s) -lt $end ]; do mv x y 2>/dev/null; mv y x 2>/dev/null; done`)
	if err != nil {
		t.Fatal(err)
	}
	ac.Dir = l.work
	ac.Env = []string{"PATH=/usr/bin:/bin"}
	if err := ac.Start(); err != nil {
		t.Fatal(err)
	}
	defer ac.Wait()
	defer cancel()
	b := l.spec(ModeWorkspaceWrite, l.work)
	b.Protected = append(b.Protected, dh)
	var leaked, refused int
	for i := 0; i < 40; i++ {
		out, code := runLoose(t, b, `cat x/.home/daemon.json y/.home/daemon.json 2>/dev/null; true`)
		switch {
		case code == ExitSetupFailed:
			refused++
		case strings.Contains(out, "OTHER-DAEMON-TOKEN"):
			leaked++
		}
	}
	t.Logf("40 commands of session B: %d read the token, %d refused", leaked, refused)
	if leaked > 0 {
		t.Errorf("%d of session B's commands read the protected home's token after it was moved aside", leaked)
	}
}
