//go:build linux

package sandbox

// Attack round on the allowlisted view (branch attack): each
// TestAttackView… that is not marked "passes" FAILS on the code it was
// written against and says what should hold; those marked "passes" are
// attacks the view held, kept as regression tests.

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// gitRepo makes a repository with one commit in dir.
func gitRepo(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{{"init", "-q"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
}

// gitConfig is what the person's next git command in dir reads for key
// (outside the sandbox).
func gitConfig(dir, key string) string {
	out, _ := exec.Command("git", "-C", dir, "config", "--get", key).Output()
	return strings.TrimSpace(string(out))
}

// TestAttackViewGitFile (FAILS): when the cwd's .git is a file (a `git
// worktree`, a submodule checkout: "gitdir: …"), freezeRepos skips it,
// so the command rewrites it to name a repository of its own in the
// workspace, whose config sets core.fsmonitor: the person's next `git
// status` in that worktree runs it outside the sandbox. What should hold:
// the cwd's .git, a file, is read-only like .git/config.
func TestAttackViewGitFile(t *testing.T) {
	l := newLayout(t)
	main := filepath.Join(l.root, "main")
	os.Mkdir(main, 0o700)
	gitRepo(t, main)
	wt := filepath.Join(l.root, "wt")
	if out, err := exec.Command("git", "-C", main, "worktree", "add", "-q", "--detach", wt).CombinedOutput(); err != nil {
		t.Fatalf("worktree: %v %s", err, out)
	}
	s := l.spec(ModeWorkspaceWrite, wt)
	s.Policy.ReadableRoots = []string{main}
	out, code := run(t, s, `git init -q .evil && git -C .evil config core.fsmonitor "touch /tmp/PWNED-fsmonitor; false" && echo "gitdir: .evil/.git" > .git`)
	t.Logf("command: %d %s", code, out)
	if got := gitConfig(wt, "core.fsmonitor"); got != "" {
		t.Errorf("the person's git in the worktree now runs core.fsmonitor %q (.git file rewritten)", got)
	}
}

// TestAttackViewHomeNestedStartupCreated (FAILS): with the home in a
// writable location (cwd ~, or writable_roots containing it), only the
// start-up files that exist are bound read-only; the nested ones that do
// not exist yet (.config/git, .config/systemd, .config/autostart,
// .config/environment.d, .local/bin) are created in their parent, which
// is writable. `~/.config/git/config` with core.fsmonitor runs in every
// git command of the person, `~/.config/systemd/user/*.service` with a
// default.target.wants link at the next login, `~/.local/bin/ls` is on
// Debian's login PATH. What should hold: none of StartupFiles can be
// created.
func TestAttackViewHomeNestedStartupCreated(t *testing.T) {
	l := newLayout(t)
	home := filepath.Join(l.root, "user")
	for _, d := range []string{".config", ".local/share"} {
		os.MkdirAll(filepath.Join(home, d), 0o700)
	}
	s := l.spec(ModeWorkspaceWrite, home)
	s.Home = home
	out, code := run(t, s, `cd "`+home+`" &&
mkdir -p .config/git && printf '[core]\n\tfsmonitor = "touch /tmp/PWNED; false"\n' > .config/git/config;
mkdir -p .config/systemd/user/default.target.wants && echo '[Service]' > .config/systemd/user/evil.service;
mkdir -p .config/autostart && echo x > .config/autostart/evil.desktop;
mkdir -p .config/environment.d && echo LD_PRELOAD=/x > .config/environment.d/evil.conf;
mkdir -p .local/bin && echo x > .local/bin/ls; true`)
	t.Logf("command: %d %s", code, out)
	for _, f := range []string{".config/git/config", ".config/systemd/user/evil.service", ".config/autostart/evil.desktop", ".config/environment.d/evil.conf", ".local/bin/ls"} {
		if _, err := os.Lstat(filepath.Join(home, f)); err == nil {
			t.Errorf("~/%s was created by a sandboxed command", f)
		}
	}
}

// TestAttackViewHomeBashAliases (FAILS): with the home in a writable
// location, an existing top-level file that is not in StartupFiles is
// bound writable; ~/.bash_aliases is sourced by every interactive bash
// of Debian's and Ubuntu's default ~/.bashrc (/etc/skel/.bashrc), so code
// appended to it runs in the person's next shell, outside the sandbox.
// What should hold: it stays read-only like ~/.bashrc.
func TestAttackViewHomeBashAliases(t *testing.T) {
	l := newLayout(t)
	home := filepath.Join(l.root, "user")
	os.MkdirAll(home, 0o700)
	os.WriteFile(filepath.Join(home, ".bashrc"), []byte("[ -f ~/.bash_aliases ] && . ~/.bash_aliases\n"), 0o644)
	os.WriteFile(filepath.Join(home, ".bash_aliases"), []byte("alias ll='ls -l'\n"), 0o644)
	s := l.spec(ModeWorkspaceWrite, home)
	s.Home = home
	out, code := run(t, s, `echo 'touch /tmp/PWNED' >> "`+home+`/.bash_aliases"`)
	t.Logf("command: %d %s", code, out)
	mustFile(t, filepath.Join(home, ".bash_aliases"), "alias ll='ls -l'\n")
}

// TestAttackViewCredentialStoreSymlink (FAILS): a credential store that
// is a symlink (~/.ssh -> dotfiles/ssh, as GNU stow and dotfile managers
// make them) is not covered: cover() skips a symlink, "what it leads to is
// covered where it is", but what it leads to is not in the list. The
// command reads the private key through the symlink or at its target.
// What should hold: the store's contents are out of the view.
func TestAttackViewCredentialStoreSymlink(t *testing.T) {
	l := newLayout(t)
	home := filepath.Join(l.root, "user")
	os.MkdirAll(filepath.Join(home, "dotfiles/ssh"), 0o700)
	os.WriteFile(filepath.Join(home, "dotfiles/ssh/id_ed25519"), []byte("SSH-KEY"), 0o600)
	os.Symlink("dotfiles/ssh", filepath.Join(home, ".ssh"))
	s := l.spec(ModeWorkspaceWrite, l.work)
	s.Home = home
	out, _ := run(t, s, `cat "`+home+`/.ssh/id_ed25519"; cat "`+home+`/dotfiles/ssh/id_ed25519"; true`)
	if strings.Contains(out, "SSH-KEY") {
		t.Errorf("the private key of a symlinked ~/.ssh is readable: %q", out)
	}
}

// TestAttackViewWritableRootInCredentialStore (FAILS): makePlan leaves a
// credential store uncovered when a writable location lies inside it.
// `writable_roots: [~/.kube/cache]` (kubectl's discovery cache, the kind
// of cache the README tells people to make writable) brings the whole
// ~/.kube into the view: the command reads ~/.kube/config, the cluster
// credentials. Same for ~/.docker/buildx and ~/.docker/config.json.
// What should hold: the rest of the store stays out.
func TestAttackViewWritableRootInCredentialStore(t *testing.T) {
	l := newLayout(t)
	home := filepath.Join(l.root, "user")
	os.MkdirAll(filepath.Join(home, ".kube/cache"), 0o700)
	os.WriteFile(filepath.Join(home, ".kube/config"), []byte("KUBE-CREDS"), 0o600)
	s := l.spec(ModeWorkspaceWrite, l.work)
	s.Home = home
	s.Policy.WritableRoots = []string{filepath.Join(home, ".kube/cache")}
	out, _ := run(t, s, `echo c > "`+home+`/.kube/cache/ok"; cat "`+home+`/.kube/config"; true`)
	if strings.Contains(out, "KUBE-CREDS") {
		t.Errorf("~/.kube/config is readable with ~/.kube/cache writable: %q", out)
	}
}

// TestAttackViewCwdTmp: a session whose cwd is /tmp (the daemon accepts
// any existing absolute directory) got the real /tmp bound read-write over
// its private one: other sessions' temp directories (sessiond-cmd-*) were
// read and written, and the user's service sockets there reached (tmux's
// /tmp/tmux-UID/default: `tmux new-window` runs unsandboxed, the issue-22
// escape), X11's /tmp/.X11-unix. Now a writable location that is or holds
// a shared temp directory (/tmp, /var/tmp, /dev/shm) runs nothing, with a
// clear error.
func TestAttackViewCwdTmp(t *testing.T) {
	l := newLayout(t)
	tmp := RealPath(os.TempDir())
	other, err := os.MkdirTemp(tmp, "sessiond-cmd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(other) })
	os.WriteFile(filepath.Join(other, "secret"), []byte("OTHER-SESSION"), 0o600)
	sockDir, err := os.MkdirTemp(tmp, "tmux-attack-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "default")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- struct{}{}
			c.Close()
		}
	}()
	mine, err := os.MkdirTemp(tmp, "sessiond-cmd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(mine) })
	s := l.spec(ModeWorkspaceWrite, tmp)
	s.TempDir = mine
	cmd, err := testCommand(context.Background(), s, `cat "`+other+`/secret"; echo planted > "`+other+`/planted"; python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print("CONNECTED")' "`+sock+`"; true`)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = tmp
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + mine}
	b, _ := cmd.CombinedOutput()
	out := string(b)
	if cmd.ProcessState.ExitCode() != ExitSetupFailed || !strings.Contains(out, "cannot be a writable location") {
		t.Errorf("a cwd of /tmp: exit %d, %q; want the setup refused", cmd.ProcessState.ExitCode(), out)
	}
	if strings.Contains(out, "OTHER-SESSION") {
		t.Errorf("another session's temp directory is readable from a cwd of /tmp: %q", out)
	}
	if _, err := os.Stat(filepath.Join(other, "planted")); err == nil {
		t.Error("another session's temp directory was written")
	}
	if strings.Contains(out, "CONNECTED") {
		t.Errorf("a same-user socket in /tmp was reached: %q", out)
	}
}

// TestAttackViewSocketInHome (FAILS): the home is in the view and
// Landlock's resolve_unix is granted on all of "/", so a same-user
// service socket that lives in the home is reached: Rancher Desktop's
// ~/.rd/docker.sock (Docker Desktop's ~/.docker/desktop is a covered
// store, this one is not), an ssh ControlPath under ~/.cache, an
// editor's server socket. docker.sock is root on the machine. What
// should hold: no same-user socket outside the writable locations is
// reached with the network off.
func TestAttackViewSocketInHome(t *testing.T) {
	l := newLayout(t)
	home := filepath.Join(l.root, "user")
	os.MkdirAll(filepath.Join(home, ".rd"), 0o700)
	sock := filepath.Join(home, ".rd/docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	s := l.spec(ModeWorkspaceWrite, l.work)
	s.Home = home
	out, _ := run(t, s, `python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print("CONNECTED")' "`+sock+`"; true`)
	if strings.Contains(out, "CONNECTED") {
		t.Errorf("a service socket in the home was reached: %q", out)
	}
}

// TestAttackViewSetuidMknod (FAILS): seccomp refuses mknod of a device
// and chmod/open(O_CREAT) with a setuid mode, but mknod(S_IFREG|S_ISUID|
// S_ISGID) passes the filter (mknodat is checked for the device bit only)
// and makes a setuid and setgid regular file in the workspace, which
// keeps its mode outside the nosuid view: "seccomp refuses setuid/setgid
// modes ... everywhere" does not hold, and the known limit names only
// openat2. (The file is empty, and a write clears the bits for a command
// without CAP_FSETID, which limits the impact.)
func TestAttackViewSetuidMknod(t *testing.T) {
	l := newLayout(t)
	s := l.spec(ModeWorkspaceWrite, l.work)
	out, code := run(t, s, `python3 -c 'import os; os.mknod("m", 0o106755)'`)
	t.Logf("command: %d %s", code, out)
	if fi, err := os.Stat(filepath.Join(l.work, "m")); err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Errorf("a setuid/setgid file was made in the workspace (%v)", fi.Mode())
	}
}

// TestAttackViewTempDirsUnderHome (FAILS): when the daemon's $TMPDIR lies
// in the home (TMPDIR=~/tmp, a common setting), every command's temp
// directory is made there, and the home is in every view read-only:
// another session's $TMPDIR (its build outputs, downloaded secrets) is
// read. What should hold: other sessions' temp directories are not
// there.
func TestAttackViewTempDirsUnderHome(t *testing.T) {
	l := newLayout(t)
	home := filepath.Join(l.root, "user")
	tmps := filepath.Join(home, "tmp")
	os.MkdirAll(tmps, 0o700)
	other, _ := os.MkdirTemp(tmps, TempDirPrefix)
	os.WriteFile(filepath.Join(other, "secret"), []byte("OTHER-SESSION"), 0o600)
	mine, _ := os.MkdirTemp(tmps, TempDirPrefix)
	s := l.spec(ModeWorkspaceWrite, l.work)
	s.Home, s.TempDir = home, mine
	out, _ := run(t, s, `cat "`+other+`/secret"; true`)
	if strings.Contains(out, "OTHER-SESSION") {
		t.Errorf("another session's temp directory under the home is readable: %q", out)
	}
}

// TestAttackViewProcOfInit (passes): PID 1 of the command's namespace is
// the helper, unconfined, whose cwd is the real cwd of the old root: its
// /proc/1/cwd, root, environ and fd would lead out of the view. ptrace
// access is refused (more capabilities than the command; Landlock
// domain).
func TestAttackViewProcOfInit(t *testing.T) {
	l := newLayout(t)
	s := l.spec(ModeWorkspaceWrite, l.work)
	for _, c := range []string{`ls /proc/1/cwd/`, `ls /proc/1/root/`, `cat /proc/1/environ`, `ls -l /proc/1/fd/`, `cat /proc/1/cwd/../home/daemon.json`} {
		if out, code := run(t, s, c); code == 0 && strings.TrimSpace(out) != "" {
			t.Errorf("%q: %s", c, out)
		}
	}
}

// TestAttackViewHardLinkCovered (passes): with the daemon's home inside
// the cwd (make run's ./.home), hard links and renames of the covered
// files and of the home reach nothing: the covered files are other
// mounts (EXDEV), the home a mount point (EBUSY).
func TestAttackViewHardLinkCovered(t *testing.T) {
	l := newLayout(t)
	home := filepath.Join(l.work, ".home")
	os.Mkdir(home, 0o700)
	os.WriteFile(filepath.Join(home, "daemon.json"), []byte(`{"token":"SECRET-TOKEN"}`), 0o600)
	s := l.spec(ModeWorkspaceWrite, l.work)
	s.Protected = []string{home}
	out, _ := run(t, s, `ln .home/daemon.json x; mv .home h2; cat x h2/daemon.json .home/daemon.json /proc/self/root`+home+`/daemon.json; true`)
	if strings.Contains(out, "SECRET-TOKEN") {
		t.Errorf("the token was read: %s", out)
	}
	mustFile(t, filepath.Join(home, "daemon.json"), `{"token":"SECRET-TOKEN"}`)
}

// TestAttackViewGitSymlinkSwap (passes): replacing the cwd's .git/config
// or .git/hooks (rm, mv, symlink) fails: they are read-only mount points.
func TestAttackViewGitSymlinkSwap(t *testing.T) {
	l := newLayout(t)
	gitRepo(t, l.work)
	s := l.spec(ModeWorkspaceWrite, l.work)
	run(t, s, `printf '[core]\n\tfsmonitor = x\n' > c; rm -f .git/config; mv .git/config .git/c2; ln -sf ../c .git/config; rm -rf .git/hooks; mv .git/hooks .git/h2; git config core.fsmonitor x; true`)
	if got := gitConfig(l.work, "core.fsmonitor"); got != "" {
		t.Errorf("core.fsmonitor %q", got)
	}
}

// openPty returns the master and the slave of a new pseudo-terminal.
func openPty(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal("no /dev/ptmx:", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// TestAttackViewTIOCSTI (passes): the helper only makes a process group
// (Setpgid), not a session, so a command keeps the daemon's controlling
// terminal when the daemon was started from one (`make run`, `sessiond`
// in a shell); /dev/tty is in the view and this kernel allows TIOCSTI
// (dev.tty.legacy_tiocsti=1). Pushing "rm -rf ~ ⏎" into the input of
// the person's shell (bubblewrap's CVE-2017-5226) is refused by
// Landlock's ioctl_dev restriction (EACCES), which must keep holding:
// granting WithIoctlDev on /dev/tty would reopen it.
func TestAttackViewTIOCSTI(t *testing.T) {
	l := newLayout(t)
	m, slave := openPty(t)
	defer m.Close()
	defer slave.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := l.spec(ModeWorkspaceWrite, l.work)
	cmd, err := testCommand(ctx, s, `python3 -c '
import fcntl, termios
f = open("/dev/tty", "wb")
for c in b"echo PWNED-BY-TIOCSTI\n":
    fcntl.ioctl(f, termios.TIOCSTI, bytes([c]))
print("injected")
'`)
	if err != nil {
		t.Fatal(err)
	}
	// The daemon's situation: its session has the terminal as its
	// controlling tty, and the helper inherits it.
	cmd.SysProcAttr.Setpgid = false
	cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, true, 3
	cmd.ExtraFiles = []*os.File{slave}
	cmd.Dir = l.work
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + l.tmp, "HOME=" + l.work}
	out, err := cmd.CombinedOutput()
	t.Logf("command: %v %s", err, out)
	// What the person's shell would read next from its terminal.
	fd := int(slave.Fd())
	unix.SetNonblock(fd, true)
	buf := make([]byte, 256)
	n, _ := unix.Read(fd, buf)
	if n > 0 && strings.Contains(string(buf[:n]), "PWNED-BY-TIOCSTI") {
		t.Errorf("the command injected %q into the input of the daemon's terminal", buf[:n])
	}
}

// TestAttackViewHiddenFileParentRenamed (FAILS): auth.token_file is
// covered by a bind over the file, but the directories between it and a
// writable location are not pinned (cover pins them for directories
// only). One command renames the token's directory (the bind moves
// with it, so that command still sees nothing); the next command's
// helper finds no file at the configured path ("nothing there to
// protect") and the token, at its new path, is read. What should hold:
// the token file is never readable.
func TestAttackViewHiddenFileParentRenamed(t *testing.T) {
	l := newLayout(t)
	sec := filepath.Join(l.work, "secrets")
	os.Mkdir(sec, 0o700)
	token := filepath.Join(sec, "token")
	os.WriteFile(token, []byte("CLUSTER-TOKEN"), 0o600)
	s := l.spec(ModeWorkspaceWrite, l.work)
	s.HiddenFiles = []string{token}
	if out, _ := run(t, s, `cat secrets/token; true`); strings.Contains(out, "CLUSTER-TOKEN") {
		t.Fatalf("the token file is readable at its path: %q", out)
	}
	out, code := run(t, s, `mv secrets s2`)
	t.Logf("rename: %d %s", code, out)
	if out, _ := run(t, s, `cat s2/token; true`); strings.Contains(out, "CLUSTER-TOKEN") {
		t.Errorf("the token is read after its directory was renamed: %q", out)
	}
	os.Rename(filepath.Join(l.work, "s2"), sec)
}

// TestAttackViewHiddenFileReplaced (FAILS): the cover of auth.token_file
// is a bind mount on the file's dentry; when the file is replaced by a
// rename (an operator rotating the token with `mv token.new token`, an
// editor saving it, config management), the kernel detaches the mount in
// every namespace, and a command that is running reads the new token.
// What should hold: a running command cannot read the token file.
func TestAttackViewHiddenFileReplaced(t *testing.T) {
	l := newLayout(t)
	etc := filepath.Join(l.root, "etc-sessiond")
	os.Mkdir(etc, 0o755)
	token := filepath.Join(etc, "token")
	os.WriteFile(token, []byte("OLD-TOKEN"), 0o600)
	s := l.spec(ModeWorkspaceWrite, l.work)
	s.HiddenFiles = []string{token}
	s.Policy.ReadableRoots = []string{etc}
	go func() {
		time.Sleep(1500 * time.Millisecond)
		os.WriteFile(token+".new", []byte("NEW-TOKEN"), 0o600)
		os.Rename(token+".new", token)
	}()
	out, _ := run(t, s, `cat "`+token+`"; sleep 3; cat "`+token+`"; true`)
	if strings.Contains(out, "TOKEN") {
		t.Errorf("a running command read the token after it was replaced: %q", out)
	}
}

// TestAttackViewNestedNamespaceUnmount (passes): the helper's covers are
// its own mounts (not locked in the non-root helper's user namespace), so
// a command that could unmount them would uncover the home and
// .git/config. In a nested user and mount namespace (`unshare -Um`,
// allowed by seccomp) umount, remount rw and new mounts are refused:
// Landlock forbids changing the mount topology, the copies are locked.
func TestAttackViewNestedNamespaceUnmount(t *testing.T) {
	l := newLayout(t)
	gitRepo(t, l.work)
	inner := filepath.Join(l.work, ".home")
	os.Mkdir(inner, 0o700)
	os.WriteFile(filepath.Join(inner, "daemon.json"), []byte("SECRET-TOKEN"), 0o600)
	s := l.spec(ModeWorkspaceWrite, l.work)
	s.Protected = []string{l.home, inner}
	out, _ := run(t, s, `unshare -Um --propagation unchanged sh -c 'umount -l .home; umount -l .git/config; mount -o remount,rw,bind .git/config; umount -l `+l.home+`; cat .home/daemon.json `+l.home+`/daemon.json; git config core.fsmonitor x' 2>&1; unshare -Um sh -c "mount --make-rprivate / && umount -l .home && cat .home/daemon.json" 2>&1; true`)
	if strings.Contains(out, "SECRET-TOKEN") {
		t.Errorf("the token was read from a nested namespace: %s", out)
	}
	if got := gitConfig(l.work, "core.fsmonitor"); got != "" {
		t.Errorf("core.fsmonitor %q written from a nested namespace", got)
	}
}

// TestAttackViewAliasesInCwd (passes; root: makes host bind mounts): a
// bind of the home's parent (~/.local) and one of daemon.json itself
// inside the writable cwd are found through mountinfo and covered; the
// alias's parents are pinned (rename EBUSY), a hard link across the
// cover fails (EXDEV), the cover cannot be unmounted.
func TestAttackViewAliasesInCwd(t *testing.T) {
	needRoot(t, "host bind mounts")
	l := newLayout(t)
	user := filepath.Join(l.root, "user")
	dh := filepath.Join(user, ".local/state/sessiond")
	os.MkdirAll(dh, 0o700)
	os.WriteFile(filepath.Join(dh, "daemon.json"), []byte("SECRET-TOKEN"), 0o600)
	loc, f := filepath.Join(l.work, "loc"), filepath.Join(l.work, "f")
	os.Mkdir(loc, 0o700)
	os.WriteFile(f, nil, 0o600)
	if err := unix.Mount(filepath.Join(user, ".local"), loc, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(loc, unix.MNT_DETACH)
	if err := unix.Mount(filepath.Join(dh, "daemon.json"), f, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(f, unix.MNT_DETACH)
	s := l.spec(ModeWorkspaceWrite, l.work)
	s.Home = user
	s.Protected = []string{dh}
	out, _ := run(t, s, "cat f loc/state/sessiond/daemon.json; mv loc/state loc/s2; ln f g; cat g; umount f; echo x > f; true")
	if strings.Contains(out, "SECRET-TOKEN") {
		t.Errorf("the token was read through an alias: %s", out)
	}
	mustFile(t, filepath.Join(dh, "daemon.json"), "SECRET-TOKEN")
}

// TestAttackViewOddHomes (passes): the daemon's home under the user's
// home (~/.local/state/sessiond) stays out with the user's home given as
// a symlink, as "/", with readable_roots "/" or naming a directory inside
// the daemon's home (a $PATH entry there), and in read-only mode with the
// cwd at the user's home.
func TestAttackViewOddHomes(t *testing.T) {
	l := newLayout(t)
	user := filepath.Join(l.root, "user")
	dh := filepath.Join(user, ".local/state/sessiond")
	os.MkdirAll(filepath.Join(dh, "bin"), 0o700)
	os.MkdirAll(filepath.Join(user, "proj"), 0o700)
	os.WriteFile(filepath.Join(dh, "daemon.json"), []byte("SECRET-TOKEN"), 0o600)
	os.Symlink(user, filepath.Join(l.root, "homelink"))
	proj := filepath.Join(user, "proj")
	cases := map[string]Spec{}
	s := l.spec(ModeWorkspaceWrite, proj)
	s.Home, s.Protected, s.Policy.ReadableRoots = filepath.Join(l.root, "homelink"), []string{dh}, []string{"/"}
	cases["home a symlink, readable /"] = s
	s = l.spec(ModeWorkspaceWrite, proj)
	s.Home, s.Protected, s.Policy.ReadableRoots = "/", []string{dh}, []string{user, filepath.Join(dh, "bin")}
	cases["home /, readable roots in the daemon's home"] = s
	s = l.spec(ModeReadOnly, user)
	s.Home, s.Protected, s.Policy.WritableRoots = user, []string{dh}, []string{user}
	cases["read-only, cwd the user's home"] = s
	for name, s := range cases {
		out, _ := run(t, s, "cat "+dh+"/daemon.json "+l.root+"/homelink/.local/state/sessiond/daemon.json; ls "+dh+"/bin; echo x > "+dh+"/new; true")
		if strings.Contains(out, "SECRET-TOKEN") {
			t.Errorf("%s: the token was read: %s", name, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dh, "new")); err == nil {
		t.Error("a file was made in the daemon's home")
	}
}

// TestAttackViewStartupFilesHomeUnset (FAILS; root: needs the password
// database's home, /root, to exist): the start-up files are frozen only
// for Spec.Home, the daemon's $HOME. When $HOME is unset or "/" (a
// service started without it, `env -i`), or names another directory
// than the user's home in the password database, a session whose cwd is
// the user's real home gets ~/.bashrc and ~/.profile writable: code in
// them runs in the person's next login shell. (Non-destructive: the
// command opens them for appending and writes nothing.) What should
// hold: the start-up files of the password database's home stay
// read-only too.
func TestAttackViewStartupFilesHomeUnset(t *testing.T) {
	needRoot(t, "/root, the password database's home of root")
	l := newLayout(t)
	var files []string
	for _, f := range []string{"/root/.bashrc", "/root/.profile"} {
		if fi, err := os.Lstat(f); err == nil && fi.Mode().IsRegular() {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		t.Fatal("no start-up file in /root (.bashrc or .profile) to check")
	}
	for _, home := range []string{"", "/"} {
		s := l.spec(ModeWorkspaceWrite, "/root")
		s.Home = home
		for _, f := range files {
			before, _ := os.Stat(f)
			out, code := run(t, s, `: >> "`+f+`" && echo WRITABLE`)
			after, _ := os.Stat(f)
			if after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
				t.Fatalf("%s changed", f)
			}
			if code == 0 && strings.Contains(out, "WRITABLE") {
				t.Errorf("HOME=%q, cwd /root: %s is writable by the command", home, f)
			}
		}
	}
}

// TestAttackViewProcSysWrites (passes): the command's /proc is its own
// PID namespace's, but /proc/sys/kernel is the machine's; a root daemon's
// command keeps uid 0 (no capability), and the owner's write bit of
// /proc/sys files would let it set kernel.core_pattern to "|/path/in/the/
// workspace" (run as real root on the next crash anywhere) or write
// /proc/sysrq-trigger. Landlock keeps /proc read-only. ("h" only prints
// sysrq's help; core_pattern is compared before and after.)
func TestAttackViewProcSysWrites(t *testing.T) {
	l := newLayout(t)
	before, _ := os.ReadFile("/proc/sys/kernel/core_pattern")
	s := l.spec(ModeWorkspaceWrite, l.work)
	out, _ := run(t, s, `echo '|/bin/true PWNED' > /proc/sys/kernel/core_pattern && echo CORE; echo h > /proc/sysrq-trigger && echo SYSRQ; echo 1 > /proc/sys/vm/drop_caches && echo CACHES; true`)
	after, _ := os.ReadFile("/proc/sys/kernel/core_pattern")
	if string(before) != string(after) {
		os.WriteFile("/proc/sys/kernel/core_pattern", before, 0)
		t.Errorf("kernel.core_pattern was changed by a command: %q", after)
	}
	for _, w := range []string{"CORE", "SYSRQ", "CACHES"} {
		if strings.Contains(out, w) {
			t.Errorf("a /proc write succeeded: %s", out)
		}
	}
}

// TestAttackViewDefaultHomeUnderUserHome (passes): the default daemon
// home ~/.local/state/sessiond with the cwd at ~ (the user's home frozen
// for its start-up files) or a writable root containing ~: the token,
// the database and the config are neither read nor written, the chain
// ~/.local/state cannot be renamed away (EBUSY), no hard link reaches
// them, and the credential stores stay out.
func TestAttackViewDefaultHomeUnderUserHome(t *testing.T) {
	l := newLayout(t)
	user := filepath.Join(l.root, "user")
	dh := filepath.Join(user, ".local/state/sessiond")
	os.MkdirAll(dh, 0o700)
	os.MkdirAll(filepath.Join(user, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(user, ".ssh/id"), []byte("SSH-KEY"), 0o600)
	for n, b := range map[string]string{"state.db": "DB-ROWS", "config.yaml": "CFG-MANUAL", "daemon.json": "SECRET-TOKEN"} {
		os.WriteFile(filepath.Join(dh, n), []byte(b), 0o600)
	}
	probe := `cd "` + user + `"; cat .local/state/sessiond/daemon.json .local/state/sessiond/state.db .local/state/sessiond/config.yaml .ssh/id; mv .local l2; mv .local/state .local/s2; mv .local/state/sessiond .local/state/s2; ln .local/state/sessiond/daemon.json x; cat x s2/daemon.json .local/s2/sessiond/daemon.json l2/state/sessiond/daemon.json; echo 'approvals: {mode: off}' > .local/state/sessiond/config.yaml; true`
	cwdHome := l.spec(ModeWorkspaceWrite, user)
	cwdHome.Home, cwdHome.Protected = user, []string{dh}
	rootHome := l.spec(ModeWorkspaceWrite, l.work)
	rootHome.Home, rootHome.Protected, rootHome.Policy.WritableRoots = user, []string{dh}, []string{l.root}
	for name, s := range map[string]Spec{"cwd ~": cwdHome, "writable root containing ~": rootHome} {
		out, _ := run(t, s, probe)
		for _, secret := range []string{"SECRET-TOKEN", "DB-ROWS", "CFG-MANUAL", "SSH-KEY"} {
			if strings.Contains(out, secret) {
				t.Errorf("%s: %s was read: %s", name, secret, out)
			}
		}
	}
	mustFile(t, filepath.Join(dh, "config.yaml"), "CFG-MANUAL")
	mustFile(t, filepath.Join(dh, "daemon.json"), "SECRET-TOKEN")
}

// TestAttackViewGitconfigReplacedOutside (passes): unlike .git/config,
// ~/.gitconfig with the home frozen (cwd ~) survives the person's `git
// config --global` (lock file renamed over it) during a command: the
// detached bind leaves the frozen top level's read-only placeholder, and
// the new file does not show.
func TestAttackViewGitconfigReplacedOutside(t *testing.T) {
	l := newLayout(t)
	home := filepath.Join(l.root, "user")
	os.Mkdir(home, 0o700)
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = person\n"), 0o644)
	s := l.spec(ModeWorkspaceWrite, home)
	s.Home = home
	go func() {
		time.Sleep(1500 * time.Millisecond)
		c := exec.Command("git", "config", "--global", "user.email", "p@example.com")
		c.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
		c.Run()
	}()
	out, code := run(t, s, `for i in $(seq 40); do git config --global core.fsmonitor "touch /tmp/PWNED; false" 2>/dev/null && echo WRITTEN && break; printf '[core]\n\tfsmonitor = x\n' >> .gitconfig 2>/dev/null && echo APPENDED && break; sleep 0.1; done; true`)
	t.Logf("command: %d %s", code, out)
	b, _ := os.ReadFile(filepath.Join(home, ".gitconfig"))
	if strings.Contains(string(b), "fsmonitor") {
		t.Errorf("~/.gitconfig was written: %q", b)
	}
	if !strings.Contains(string(b), "p@example.com") {
		t.Errorf("the person's git config --global did not replace ~/.gitconfig (test setup): %q", b)
	}
}

// racerArg makes the test binary the racer of
// TestAttackViewFreezeReposSymlinkRace: in its cwd it makes .git (a
// directory) and .gitx (a symlink to where the helper keeps the old
// root while it builds a view) and swaps them (renameat2
// RENAME_EXCHANGE) as fast as it can until a file "stop" appears or 35
// seconds pass. A model would write the same ten lines of C or Go.
const racerArg = "__attack-view-racer"

func init() {
	if len(os.Args) < 2 || os.Args[1] != racerArg {
		return
	}
	os.Mkdir(".git", 0o755)
	os.Mkdir(".git/hooks", 0o755)
	os.Symlink(oldRoot, ".gitx")
	end := time.Now().Add(35 * time.Second)
	for i := 0; ; i++ {
		if i%100000 == 0 {
			if _, err := os.Stat("stop"); err == nil || time.Now().After(end) {
				os.Exit(0)
			}
		}
		unix.Renameat2(unix.AT_FDCWD, ".git", unix.AT_FDCWD, ".gitx", unix.RENAME_EXCHANGE)
	}
}

// runStatus runs command under s like run, but returns the helper's
// setup failures (exit 126) as output instead of failing the test.
func runStatus(s Spec, command string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, err := testCommand(ctx, s, command)
	if err != nil {
		return "", err
	}
	cmd.Dir = s.Cwd
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + s.TempDir, "HOME=" + s.Cwd}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestAttackViewFreezeReposSymlinkRace (FAILS, a race this 2-core
// machine wins within seconds as root, typically in under 100 commands;
// as the unprivileged user in some 250, not always within the 30 s):
// freezeRepos checks the cwd's .git with Lstat and then binds it onto
// itself by path, mount(".git", ".git"), which follows symlinks and
// resolves the target before the source. A command of another session
// working in the same cwd (which had no .git when it started, so
// nothing is pinned in its view) swaps .git, a directory, with a
// symlink to /.sessiond-oldroot in a tight loop. When the swap falls
// between the two lookups, the helper of the next command binds the
// whole old root (the host's /, recursively, every mount) read-write
// onto the cwd's .git directory, inside a writable location: that
// command reads and writes anything on the machine (other users' files
// as root, the user's ~/.ssh, /run/user's sockets, /etc) — a full
// escape. (The daemon's home is still covered there: coverAll finds the
// alias in mountinfo as root; as the unprivileged user one hit showed
// daemon.json, the token, under the alias.) The same check-then-mount-by-path pattern is in
// bindReadOnly (.git/config, .git/hooks, the nested start-up files) and
// in cover's chain pins. What should hold: no command ever sees a file
// outside its view.
func TestAttackViewFreezeReposSymlinkRace(t *testing.T) {
	l := newLayout(t)
	outside := filepath.Join(l.root, "outside")
	os.Mkdir(outside, 0o700)
	os.WriteFile(filepath.Join(outside, "secret"), []byte("OUTSIDE-SECRET"), 0o600)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tmpA := filepath.Join(l.root, "tmpA")
	os.Mkdir(tmpA, 0o700)
	sA := l.spec(ModeWorkspaceWrite, l.work)
	sA.TempDir = tmpA
	sA.Policy.ReadableRoots = []string{exe}
	done := make(chan string, 1)
	go func() { out, _ := runStatus(sA, `"`+exe+`" `+racerArg); done <- out }()
	defer func() {
		os.WriteFile(filepath.Join(l.work, "stop"), nil, 0o600)
		<-done
	}()
	gitx := filepath.Join(l.work, ".gitx")
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Lstat(gitx); err == nil {
			break
		}
	}
	sB := l.spec(ModeWorkspaceWrite, l.work)
	probe := `for p in .git .gitx; do if [ -d "$p/usr/bin" ]; then echo "HOST ROOT AT $p"; cat "$p` + outside + `/secret"; echo; echo escaped > "$p` + outside + `/escaped" && echo WROTE; cat "$p` + l.home + `/daemon.json"; fi; done; true`
	runs, setupFailures := 0, 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); runs++ {
		out, err := runStatus(sB, probe)
		if err != nil {
			setupFailures++ // the helper failed closed this time
			continue
		}
		if strings.Contains(out, "HOST ROOT") {
			t.Errorf("after %d commands (%d failed closed), a command saw the host's root at the cwd's .git: %s", runs+1, setupFailures, out)
			break
		}
	}
	t.Logf("%d commands, %d failed closed", runs, setupFailures)
	if _, err := os.Stat(filepath.Join(outside, "escaped")); err == nil {
		t.Error("a command wrote outside its view")
	}
}
