//go:build linux

package sandbox

// Second attack round (branch attack2), against the rewritten view
// (descriptor-based mounts, freeze views, seccomp file rules): each
// TestAttack2… not marked "(passes)" FAILS on the code it was written
// against and says what should hold; those marked "(passes)" are attacks
// the sandbox held, kept as regression tests.

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cProgram compiles src (C) to a static binary at dst, outside the
// sandbox; the test is skipped without a C compiler.
func cProgram(t *testing.T, src, dst string) {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Fatal("gcc is needed (.ci/run installs it)")
	}
	c := filepath.Join(t.TempDir(), "p.c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-static", "-O0", "-o", dst, c).CombinedOutput(); err != nil {
		if out2, err2 := exec.Command(cc, "-O0", "-o", dst, c).CombinedOutput(); err2 != nil {
			t.Fatalf("gcc: %v %s %s", err, out, out2)
		}
	}
	os.Chmod(dst, 0o755)
}

// TestAttack2SetuidViaOTmpfile (passes, but the rule is bypassed): the
// seccomp file rules refuse open/openat/creat with O_CREAT and a set-id
// mode, but O_TMPFILE (__O_TMPFILE|O_DIRECTORY) creates a file without
// O_CREAT, and its mode is kept, S_ISUID included; linkat of
// /proc/self/fd/N (AT_SYMLINK_FOLLOW) then names it in the workspace
// (io_uring's IORING_OP_OPENAT, allowed with the network on, passes the
// filter too). What holds is the kernel's: the first write, fallocate or
// truncate without CAP_FSETID clears S_ISUID/S_ISGID, so only an empty
// set-id file can be made (fstat right after the open shows 06755). What
// should hold: no command makes a setuid or setgid file with content.
func TestAttack2SetuidViaOTmpfile(t *testing.T) {
	l := newLayout(t)
	bin := filepath.Join(l.work, "mk")
	cProgram(t, `#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/stat.h>
int main(void) {
	umask(0);
	int fd = open(".", O_TMPFILE | O_WRONLY, 06755);
	if (fd < 0) { perror("open O_TMPFILE"); return 1; }
	if (write(fd, "#!/bin/sh\nid\n", 13) != 13) { perror("write"); return 1; }
	char p[64];
	snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
	if (linkat(AT_FDCWD, p, AT_FDCWD, "suid", AT_SYMLINK_FOLLOW) < 0) { perror("linkat"); return 1; }
	return 0;
}
`, bin)
	s := l.spec(ModeWorkspaceWrite, l.work)
	out, code := run(t, s, `./mk; ls -l suid`)
	t.Logf("command: %d %s", code, out)
	fi, err := os.Stat(filepath.Join(l.work, "suid"))
	if err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Errorf("the command made a set-id file in the workspace: %v", fi.Mode())
	}
}

// TestAttack2DescriptorTempFile (FAILS): with the cwd inside the daemon's
// home, the home is a read-only view of its entries with CoveredFiles
// (daemon.json, state.db, …) left out by exact name. WriteDescriptor
// writes the token to a temporary ".daemon.json.*" first (os.CreateTemp
// in the home) and renames it: one present when the view is made (a
// daemon, this one or another registered one, writing its descriptor
// while a command starts; one left by a crash between the write and the
// rename) is bound read-only into the view, and the command reads the
// token (full control of the daemon: approvals, escalated commands).
// (The home under the user's home, as the default ~/.local/state/sessiond
// is; the same for the person's editor's copies of config.yaml,
// config.yaml~ and .config.yaml.swp.) What should hold: no file holding
// the descriptor or the config shows, under any name it is written with
// (a view of the home could keep only the writable locations' chain).
func TestAttack2DescriptorTempFile(t *testing.T) {
	l := newLayout(t)
	ws := filepath.Join(l.home, "ws")
	os.Mkdir(ws, 0o700)
	// The descriptor's temporary file, and the person's editor's copies
	// of config.yaml (the same class: covered by exact name only).
	for _, name := range []string{".daemon.json.123456789", "config.yaml~", ".config.yaml.swp"} {
		if err := os.WriteFile(filepath.Join(l.home, name), []byte(`{"token":"SECRET-TOKEN"}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := l.spec(ModeWorkspaceWrite, ws)
	s.Home = l.root // the user's home, holding the daemon's (~/.sessiond)
	for _, name := range []string{".daemon.json.123456789", "config.yaml~", ".config.yaml.swp"} {
		out, _ := run(t, s, `cat "../`+name+`" 2>&1; true`)
		if strings.Contains(out, "SECRET-TOKEN") {
			t.Errorf("the command read %s in the daemon's home: %q", name, out)
		}
	}
}

// TestAttack2TokenFileTempLink (FAILS): createTokenFile writes the
// auth.token_file's token to ".NAME.new-*" beside it and hard-links it to
// NAME, removing the temporary name afterwards: while both exist (a
// daemon making its token while a command of another daemon's session,
// or its own, starts; a crash before the remove leaves it for good) the
// temporary name is the same file under a name the view does not know.
// The hidden file is left out of a read-only view of its directory by
// its name only, so the command reads the token through the other name.
// What should hold: a hidden file's content shows under no name of its
// directory (the view could leave out every name of the same inode).
func TestAttack2TokenFileTempLink(t *testing.T) {
	l := newLayout(t)
	user := filepath.Join(l.root, "user")
	cfg := filepath.Join(user, ".config", "sessiond")
	os.MkdirAll(cfg, 0o700)
	token := filepath.Join(cfg, "token")
	os.WriteFile(token, []byte("SECRET-TOKEN\n"), 0o600)
	if err := os.Link(token, filepath.Join(cfg, ".token.new-123456")); err != nil {
		t.Fatal(err)
	}
	s := l.spec(ModeWorkspaceWrite, l.work)
	s.Home = user
	s.HiddenFiles = []string{token}
	out, _ := run(t, s, `cat "`+token+`" "`+cfg+`"/.token.new-* 2>&1; true`)
	if strings.Contains(out, "SECRET-TOKEN") {
		t.Errorf("the command read the hidden token file through its temporary link: %q", out)
	}
}

// runLoose runs command under s like run, but a setup failure (the
// sandbox refusing, exit ExitSetupFailed) is returned, not fatal.
func runLoose(t *testing.T, s Spec, command string, path ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, err := testCommand(ctx, s, command)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = s.Cwd
	cmd.Env = []string{"PATH=" + strings.Join(append([]string{"/usr/local/bin:/usr/bin:/bin"}, path...), ":"), "TMPDIR=" + s.TempDir, "HOME=" + s.Cwd}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("run %q: %v", command, err)
	}
	return out.String(), 0
}

// TestAttack2PinnedChainRename (passes): when A's view knows the
// protected home in its workspace, the directories between the
// workspace and the home are mount points in A's view: A can neither
// rename nor exchange them (EBUSY), nor the home itself.
func TestAttack2PinnedChainRename(t *testing.T) {
	l := newLayout(t)
	dh := filepath.Join(l.work, "x", "y", ".home")
	os.MkdirAll(dh, 0o700)
	os.WriteFile(filepath.Join(dh, "daemon.json"), []byte(`{"token":"SECRET-TOKEN"}`), 0o600)
	s := l.spec(ModeWorkspaceWrite, l.work)
	s.Protected = append(s.Protected, dh)
	for _, c := range []string{`mv x z`, `mv x/y x/z`, `mv x/y/.home x/y/h`, `mkdir z && mv -T --exchange x z 2>/dev/null || python3 -c "import os; os.rename('x','z')"`} {
		out, _ := run(t, s, c+` && echo MOVED; true`)
		if strings.Contains(out, "MOVED") {
			t.Errorf("%q moved a pinned directory: %s", c, out)
		}
	}
	mustFile(t, filepath.Join(dh, "daemon.json"), `{"token":"SECRET-TOKEN"}`)
}

// TestAttack2HardLinkSetuid (passes): a hard link of a setuid binary of
// the system trees (/usr/bin/su, same file system as the workspace here)
// into the workspace would keep a setuid file there (an old, vulnerable
// version surviving an upgrade); Landlock refuses the cross-directory
// link from a read-only tree (no REFER right there), and the mounts
// differ (EXDEV).
func TestAttack2HardLinkSetuid(t *testing.T) {
	l := newLayout(t)
	s := l.spec(ModeWorkspaceWrite, l.work)
	out, _ := run(t, s, `for f in /usr/bin/su /usr/bin/passwd /usr/bin/mount /bin/su; do ln "$f" ./l$(basename $f) 2>&1; done; ls -l; true`)
	t.Logf("%s", out)
	ents, _ := os.ReadDir(l.work)
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("a set-id file %s was linked into the workspace", e.Name())
		}
	}
}

// TestAttack2WritableRootOverlapsHome (passes): writable roots that are
// the daemon's home, contain it, or lie inside it, and a cwd that is the
// home: the covered files stay out of the view and unchanged.
func TestAttack2WritableRootOverlapsHome(t *testing.T) {
	l := newLayout(t)
	inside := filepath.Join(l.home, "cache")
	os.Mkdir(inside, 0o700)
	for name, roots := range map[string][]string{"home": {l.home}, "parent": {l.root}, "inside": {inside}, "inside+home": {inside, l.home}, "home+parent": {l.home, l.root}} {
		for _, cwd := range []string{l.work, l.home} {
			s := l.spec(ModeWorkspaceWrite, cwd)
			s.Policy.WritableRoots = roots
			out, code := runLoose(t, s, `cat "`+l.home+`/daemon.json"; echo 'approvals: {mode: auto}' > "`+l.home+`/config.yaml"; rm -f "`+l.home+`/state.db"; mv "`+l.home+`/daemon.json" "`+l.home+`/x" ; true`)
			if strings.Contains(out, "SECRET-TOKEN") {
				t.Errorf("%s, cwd %s: the token was read (%d): %s", name, cwd, code, out)
			}
			mustFile(t, filepath.Join(l.home, "config.yaml"), "approvals: {mode: manual}\n")
			mustFile(t, filepath.Join(l.home, "state.db"), "DB")
			mustFile(t, filepath.Join(l.home, "daemon.json"), `{"token":"SECRET-TOKEN"}`)
		}
	}
}

// TestAttack2HomeStartupFilesMissed (FAILS): with a writable location
// containing the user's home, StartupFiles (a denylist) are read-only and
// the home's top level takes no new entry, but everything else that
// runs code in the person's next tool stays writable: an existing
// ~/.bash_completion (sourced by bash-completion in every interactive
// bash), ~/.gdbinit, ~/.psqlrc (\! runs a shell), ~/.irbrc; and below a
// kept directory new files can be made: a .pth file in the user
// site-packages (~/.local/lib/python3.X/site-packages: every python3 the
// person runs executes its "import" line), an IPython startup script,
// a bash-completion completion. Impact: code execution as the person,
// outside the sandbox, on their next shell or python. What should hold:
// a command cannot change what the person's shell or tools run at start.
func TestAttack2HomeStartupFilesMissed(t *testing.T) {
	l := newLayout(t)
	user := filepath.Join(l.work, "me")
	site := filepath.Join(user, ".local", "lib", "python3.11", "site-packages")
	for _, d := range []string{site, filepath.Join(user, ".ipython", "profile_default", "startup"), filepath.Join(user, ".local", "share", "bash-completion", "completions")} {
		os.MkdirAll(d, 0o755)
	}
	existing := []string{".bash_completion", ".gdbinit", ".psqlrc", ".irbrc"}
	for _, f := range existing {
		os.WriteFile(filepath.Join(user, f), []byte("# mine\n"), 0o644)
	}
	s := l.spec(ModeWorkspaceWrite, user)
	s.Home = user
	cmds := map[string]string{
		".bash_completion": `echo 'touch /tmp/PWNED' >> ~/.bash_completion`,
		".gdbinit":         `echo 'shell touch /tmp/PWNED' >> ~/.gdbinit`,
		".psqlrc":          `echo '\! touch /tmp/PWNED' >> ~/.psqlrc`,
		".irbrc":           `echo 'system("touch /tmp/PWNED")' >> ~/.irbrc`,
		"site-packages":    `echo 'import os; os.system("touch /tmp/PWNED")' > ~/.local/lib/python3.11/site-packages/zz.pth`,
		"ipython":          `echo 'import os' > ~/.ipython/profile_default/startup/00-x.py`,
		"completions":      `echo 'touch /tmp/PWNED' > ~/.local/share/bash-completion/completions/git`,
	}
	for name, c := range cmds {
		if out, code := run(t, s, "HOME="+user+"; "+c); code == 0 {
			t.Errorf("%s: %q succeeded: %s", name, c, out)
		}
	}
	for _, f := range existing {
		mustFile(t, filepath.Join(user, f), "# mine\n")
	}
}

// TestAttack2OtherTempDirsThroughReadableTmp (FAILS): other commands'
// temp directories are covered only when they show under a parent other
// than /tmp ("/tmp is private in the view"); but a read-only source may
// be /tmp itself or contain it: a readable root of /tmp (or /), or a
// $PATH entry /tmp/bin (whose parent, /tmp, is bound as the tool's root).
// Bound read-only over the private /tmp, the real /tmp shows with every
// other session's sessiond-cmd-* directory (the same user's, readable):
// their outputs, files written by commands of other sessions, their
// secrets. (Only writable locations are refused for holding /tmp.) What
// should hold: no other command's temp directory shows in any view.
func TestAttack2OtherTempDirsThroughReadableTmp(t *testing.T) {
	l := newLayout(t)
	mine, err := os.MkdirTemp("/tmp", TempDirPrefix)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(mine)
	other, err := os.MkdirTemp("/tmp", TempDirPrefix)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(other)
	os.WriteFile(filepath.Join(other, "secret"), []byte("OTHER-SESSION-SECRET"), 0o600)
	if err := os.Mkdir("/tmp/bin", 0o755); err == nil {
		defer os.Remove("/tmp/bin")
	}
	for name, c := range map[string]struct {
		roots []string
		path  []string
	}{"readable root /tmp": {roots: []string{"/tmp"}}, "PATH /tmp/bin": {path: []string{"/tmp/bin"}}} {
		s := l.spec(ModeWorkspaceWrite, l.work)
		s.TempDir = mine
		s.Policy.ReadableRoots = c.roots
		out, code := runLoose(t, s, `cat "`+other+`/secret"; true`, c.path...)
		if strings.Contains(out, "OTHER-SESSION-SECRET") {
			t.Errorf("%s: the command read another command's temp directory (%d): %q", name, code, out)
		}
	}
}

// TestAttack2UserKeyring (FAILS): the kernel keyrings are no file and no
// socket: neither the view, Landlock nor the seccomp rules (files,
// sockets) touch add_key/keyctl. A command reads the keys of the daemon
// process's session keyring (inherited: possessed, read by its
// possessor rights, also across the user namespace the helper makes for
// an unprivileged daemon, as sessiond-test shows) and, as root (no user
// namespace of its own) while that session keyring is the default
// user-session one linking it, of its user keyring (seen in a run of this
// test before the session keyring was replaced by add_key): a Kerberos ticket cache (KEYRING:persistent, the
// default of Fedora and RHEL), keys that tools keep there (keyctl padd
// user …, ecryptfs, cifs/nfs credentials). The README's view leaves the
// home's credential stores out; this store of the same user is in
// reach. What should hold: a command reads no key of the daemon's
// keyrings (a fresh session keyring for the helper, and seccomp refusing
// add_key, keyctl and request_key).
func TestAttack2UserKeyring(t *testing.T) {
	l := newLayout(t)
	bin := filepath.Join(l.work, "rk")
	cProgram(t, `#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/keyctl.h>
int main(int argc, char **argv) {
	long ring = atol(argv[1]);
	long id = syscall(SYS_keyctl, KEYCTL_SEARCH, ring, "user", argv[2], 0);
	if (id < 0) { perror("keyctl search"); return 1; }
	char buf[256] = {0};
	long n = syscall(SYS_keyctl, KEYCTL_READ, id, buf, sizeof buf - 1);
	if (n < 0) { perror("keyctl read"); return 1; }
	printf("%s\n", buf);
	return 0;
}
`, bin)
	for _, ring := range []int{unix.KEY_SPEC_SESSION_KEYRING, unix.KEY_SPEC_USER_KEYRING} {
		name := "sessiond-attack2-" + strconv.Itoa(-ring)
		id, err := unix.AddKey("user", name, []byte("KEYRING-SECRET"), ring)
		if err != nil {
			t.Logf("add_key %d: %v", ring, err)
			continue
		}
		defer unix.KeyctlInt(unix.KEYCTL_UNLINK, id, ring, 0, 0)
		defer unix.KeyctlInt(unix.KEYCTL_REVOKE, id, 0, 0, 0)
		s := l.spec(ModeWorkspaceWrite, l.work)
		out, code := run(t, s, "./rk "+strconv.Itoa(ring)+" "+name+"; true")
		t.Logf("keyring %d: command: %d %s", ring, code, out)
		if strings.Contains(out, "KEYRING-SECRET") {
			t.Errorf("keyring %d: the command read a key of the daemon's: %q", ring, out)
		}
	}
}

// TestAttack2AbstractUnixSocket (passes): the user's services listening
// on abstract Unix sockets (X11's @/tmp/.X11-unix/X0: keystrokes into the
// person's terminal; D-Bus, containerd) are out of reach with the network
// on as well as off: Landlock's abstract Unix socket scope refuses the
// connect.
func TestAttack2AbstractUnixSocket(t *testing.T) {
	l := newLayout(t)
	name := "sessiond-attack2-" + strconv.Itoa(os.Getpid())
	ln, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HELLO-FROM-SERVICE\n"))
			c.Close()
		}
	}()
	bin := filepath.Join(l.work, "ac")
	cProgram(t, `#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>
int main(int argc, char **argv) {
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	if (s < 0) { perror("socket"); return 1; }
	struct sockaddr_un a = {0};
	a.sun_family = AF_UNIX;
	size_t n = strlen(argv[1]);
	memcpy(a.sun_path + 1, argv[1], n);
	if (connect(s, (struct sockaddr *)&a, sizeof(sa_family_t) + 1 + n) < 0) { perror("connect"); return 1; }
	char buf[64] = {0};
	read(s, buf, sizeof buf - 1);
	printf("%s", buf);
	return 0;
}
`, bin)
	for _, network := range []bool{false, true} {
		s := l.spec(ModeWorkspaceWrite, l.work)
		s.Policy.Network = network
		out, code := run(t, s, "./ac "+name+"; true")
		t.Logf("network %v: %d %s", network, code, out)
		if strings.Contains(out, "HELLO-FROM-SERVICE") {
			t.Errorf("network %v: the command reached an abstract socket of the daemon's side", network)
		}
	}
}

// TestAttack2SysProbe (passes): /sys is bound read-only (recursively:
// cgroup2, securityfs, tracefs, bpffs, debugfs beneath it too): nothing
// there is writable, and no tracefs or debugfs output of the kernel's
// (which would show the daemon's system calls) is readable.
func TestAttack2SysProbe(t *testing.T) {
	l := newLayout(t)
	s := l.spec(ModeWorkspaceWrite, l.work)
	out, _ := run(t, s, `find /sys -maxdepth 5 -writable 2>/dev/null | head -5; (echo 1 > /sys/fs/cgroup/cgroup.procs) 2>/dev/null && echo CGWRITE; cat /sys/kernel/tracing/trace /sys/kernel/debug/tracing/trace 2>/dev/null | head -c 200; true`)
	if strings.TrimSpace(out) != "" {
		t.Errorf("/sys: %q", out)
	}
}

// TestAttack2HiddenFileChainRenamed (FAILS): a hidden file
// (auth.token_file) below a writable location is left out of a
// read-only view of its own directory (coverTargetAt), but unlike
// cover's, that path pins nothing between the writable location and the
// directory. With the cwd at the user's home and the token at
// ~/.cache/sessiond/auth/token, one command renames ~/.cache/sessiond
// away (not a mount point: allowed; the frozen directory moves along,
// covered in that command's view; ~/.local/share/sessiond/token happens
// to hold: ~/.local/share is pinned by the chain of a missing credential
// store, .local/share/containers/podman/machine) and the
// session's next command, planned with the token not at its path
// ("nothing there to protect"), reads it at the new one: the daemon's
// token, full control of the daemon. What should hold: no command moves
// a hidden file out of its cover (the chain pinned as cover pins it), or
// nothing runs.
func TestAttack2HiddenFileChainRenamed(t *testing.T) {
	for _, rel := range []string{".local/share/sessiond/token", ".cache/sessiond/auth/token"} {
		l := newLayout(t)
		user := filepath.Join(l.work, "me")
		token := filepath.Join(user, rel)
		os.MkdirAll(filepath.Dir(token), 0o700)
		os.WriteFile(token, []byte("SECRET-TOKEN\n"), 0o600)
		s := l.spec(ModeWorkspaceWrite, user)
		s.Home = user
		s.HiddenFiles = []string{token}
		top := strings.SplitN(rel, "/", 3)
		moved := filepath.Join(top[0], top[1])
		out1, _ := run(t, s, `mv "`+moved+`" "`+moved+`-x" && echo MOVED; cat "`+rel+`"; true`)
		out2, _ := runLoose(t, s, `cat "`+strings.Replace(rel, moved, moved+"-x", 1)+`"; true`)
		t.Logf("%s: first %q, next %q", rel, out1, out2)
		if strings.Contains(out1+out2, "SECRET-TOKEN") {
			t.Errorf("%s: a command read the hidden token after the previous one renamed its parent away", rel)
		}
	}
}

// TestAttack2RepoSearchBudgetExhausted (FAILS; builds on the known limit
// "searched two levels deep, 256 directories at most"): the limit is
// the command's to use. With the cwd holding the person's projects
// (~/src/proj/.git, one level down: searched, frozen), one command makes
// 300 empty directories named 000…299 (sorted before "proj", walked
// first); the session's next command finds proj/.git unfrozen, sets
// core.fsmonitor in proj/.git/config, and the person's next `git status`
// in ~/src/proj runs it outside the sandbox. What should hold: a
// repository the search covers on a clean workspace cannot be taken out
// of it by a command (the budget counts no directory a command can
// create, or an exhausted budget fails closed).
func TestAttack2RepoSearchBudgetExhausted(t *testing.T) {
	l := newLayout(t)
	proj := filepath.Join(l.work, "proj")
	os.Mkdir(proj, 0o755)
	gitRepo(t, proj)
	s := l.spec(ModeWorkspaceWrite, l.work)
	if out, _ := run(t, s, `git -C proj config core.fsmonitor "touch /tmp/PWNED; false" && echo WRITTEN; true`); strings.Contains(out, "WRITTEN") {
		t.Fatalf("proj/.git/config writable on a clean workspace: %s", out)
	}
	run(t, s, `for i in $(seq -w 0 299); do mkdir "$i"; done`)
	out, code := run(t, s, `git -C proj config core.fsmonitor "touch /tmp/PWNED; false" && echo WRITTEN; true`)
	t.Logf("next command: %d %s", code, out)
	if got := gitConfig(proj, "core.fsmonitor"); got != "" {
		t.Errorf("the person's git in proj now runs core.fsmonitor %q", got)
	}
}

// TestAttack2FileCapabilityThroughUserNamespace (passes): the
// seccomp rules keep set-id modes out, but a file capability is a
// set-id bit by another name. A root daemon's command (uid 0, no
// capability, no user namespace of its own) makes a user namespace
// (unshare -U, no capability needed, not filtered), maps 0 to 0, and
// there holds CAP_SETFCAP over root's files: setcap cap_setuid+ep on a
// copy of a program in the workspace. Its security.capability names
// root id 0, so outside the sandbox it grants CAP_SETUID to whoever runs
// it. Held: the user namespace is made, but Landlock keeps /proc
// read-only, so no uid_map can be written (EACCES) and an unmapped ns
// root has no say over root's files. What should hold: no command
// leaves a file with file capabilities.
func TestAttack2FileCapabilityThroughUserNamespace(t *testing.T) {
	needRoot(t, "file capabilities through a user namespace (an unprivileged daemon's ns root maps to its own uid)")
	if _, err := exec.LookPath("setcap"); err != nil {
		t.Fatal("setcap is needed (libcap2-bin; .ci/run installs it)")
	}
	l := newLayout(t)
	s := l.spec(ModeWorkspaceWrite, l.work)
	out, code := run(t, s, `cp /bin/true ./t && unshare -U --map-root-user sh -c 'PATH=$PATH:/usr/sbin:/sbin; setcap cap_setuid+ep ./t' 2>&1; true`)
	t.Logf("command: %d %s", code, out)
	b, _ := exec.Command("getcap", filepath.Join(l.work, "t")).CombinedOutput()
	t.Logf("getcap: %s", b)
	if strings.Contains(string(b), "cap_setuid") {
		t.Errorf("the command left a file with capabilities in the workspace: %s", b)
	}
}
