//go:build linux

package sandbox

// Second attack round (branch attack2), against the rewritten view
// (descriptor-based mounts, freeze views, seccomp file rules): each
// TestAttack2… not marked "(passes)" FAILS on the code it was written
// against and says what should hold; those marked "(passes)" are attacks
// the sandbox held, kept as regression tests.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// cProgram compiles src (C) to a static binary at dst, outside the
// sandbox; the test is skipped without a C compiler.
func cProgram(t *testing.T, src, dst string) {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc")
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

// TestAttack2SetuidViaOTmpfile (FAILS): the seccomp file rules refuse
// open/openat/creat with O_CREAT and a set-id mode, but O_TMPFILE
// (__O_TMPFILE|O_DIRECTORY) creates a file without O_CREAT, and its mode
// is kept, S_ISUID included; linkat of /proc/self/fd/N
// (AT_SYMLINK_FOLLOW) then gives it a name in the workspace. A copy of a
// shell made so is setuid to the daemon's user (root in CI) outside the
// sandbox: anyone who runs it (another local user, the person's own
// tools scanning the workspace) runs as the daemon's user. What should
// hold: no command makes a setuid or setgid file.
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
// What should hold: no file holding the descriptor shows, under any name
// the daemon writes it with.
func TestAttack2DescriptorTempFile(t *testing.T) {
	l := newLayout(t)
	ws := filepath.Join(l.home, "ws")
	os.Mkdir(ws, 0o700)
	if err := os.WriteFile(filepath.Join(l.home, ".daemon.json.123456789"), []byte(`{"token":"SECRET-TOKEN"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := l.spec(ModeWorkspaceWrite, ws)
	s.Home = l.root // the user's home, holding the daemon's (~/.sessiond)
	out, _ := run(t, s, `ls -la ..; cat ../daemon.json ../.daemon.json.* 2>&1; true`)
	t.Logf("%s", out)
	if strings.Contains(out, "SECRET-TOKEN") {
		t.Errorf("the command read the daemon's token: %q", out)
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
