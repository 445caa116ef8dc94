package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// The view shows only what a command may use (issue 22): no /run (the
// user's services, /run/user, docker.sock), no /var, nothing of the file
// system beside the workspace, and a private /tmp holding only $TMPDIR.
func TestViewShowsOnlyWhatItMayUse(t *testing.T) {
	l := newLayout(t)
	beside := filepath.Join(l.root, "beside")
	os.Mkdir(beside, 0o755)
	os.WriteFile(filepath.Join(beside, "f"), []byte("x"), 0o644)
	inTmp, err := os.CreateTemp("", "sessiond-view-test-")
	if err != nil {
		t.Fatal(err)
	}
	inTmp.Close()
	t.Cleanup(func() { os.Remove(inTmp.Name()) })
	s := l.spec(ModeWorkspaceWrite, l.work)
	for _, absent := range []string{"/run", "/var", beside, inTmp.Name(), l.home} {
		if out, code := run(t, s, `test -e "`+absent+`"`); code == 0 {
			t.Errorf("%s is in the view: %s", absent, out)
		}
	}
	if out, code := run(t, s, `cat /etc/os-release >/dev/null && ls /usr/bin/env && echo x > /tmp/private && echo y > "$TMPDIR/t" && echo z > here`); code != 0 {
		t.Fatalf("the everyday view fails (%d): %s", code, out)
	}
	if _, err := os.Stat("/tmp/private"); err == nil {
		os.Remove("/tmp/private")
		t.Error("a write to the command's /tmp reached the real /tmp")
	}
	mustFile(t, filepath.Join(l.work, "here"), "z\n")
}

// Outside the writable locations everything is read-only at the mount
// level: chmod, utime and xattrs fail as writes do (issue 22, finding 3).
func TestViewMetadataReadOnly(t *testing.T) {
	l := newLayout(t)
	user := filepath.Join(l.root, "user")
	os.Mkdir(user, 0o755)
	f := filepath.Join(user, "f")
	os.WriteFile(f, []byte("x"), 0o644)
	before, _ := os.Stat(f)
	s := l.spec(ModeWorkspaceWrite, l.work)
	s.Home = user
	if out, code := run(t, s, `cat "`+f+`"`); code != 0 || out != "x" {
		t.Fatalf("the user's home is not readable: %d %q", code, out)
	}
	for _, c := range []string{`chmod 600 "` + f + `"`, `touch -d 2000-01-01 "` + f + `"`, `chmod 700 "` + user + `"`,
		`python3 -c 'import os,sys; os.setxattr(sys.argv[1], "user.x", b"1")' "` + f + `"`} {
		if out, code := run(t, s, c); code == 0 {
			t.Errorf("%q succeeded: %s", c, out)
		}
	}
	after, _ := os.Stat(f)
	if after.Mode() != before.Mode() || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("metadata changed: %v %v -> %v %v", before.Mode(), before.ModTime(), after.Mode(), after.ModTime())
	}
}

// The credential stores of the home are not in the view unless
// readable_roots names them.
func TestViewLeavesOutCredentialStores(t *testing.T) {
	l := newLayout(t)
	user := filepath.Join(l.root, "user")
	for p, body := range map[string]string{".ssh/id_ed25519": "SSH-KEY", ".aws/credentials": "AWS-KEY", ".netrc": "NETRC", "notes": "NOTES"} {
		os.MkdirAll(filepath.Dir(filepath.Join(user, p)), 0o700)
		os.WriteFile(filepath.Join(user, p), []byte(body), 0o600)
	}
	s := l.spec(ModeWorkspaceWrite, l.work)
	s.Home = user
	out, _ := run(t, s, `cat "`+user+`/notes"; cat "`+user+`/.ssh/id_ed25519" "`+user+`/.aws/credentials" "`+user+`/.netrc" 2>/dev/null; true`)
	if out != "NOTES" {
		t.Errorf("the home shows %q, want only NOTES", out)
	}
	s.Policy.ReadableRoots = []string{filepath.Join(user, ".ssh")}
	if out, _ := run(t, s, `cat "`+user+`/.ssh/id_ed25519"`); out != "SSH-KEY" {
		t.Errorf("a store named in readable_roots shows %q", out)
	}
}

// /dev holds the everyday devices and no block device (issue 22, finding
// 4: a root daemon's command read the home from the disk under the mount
// that hid it).
func TestViewMinimalDev(t *testing.T) {
	l := newLayout(t)
	s := l.spec(ModeWorkspaceWrite, l.work)
	out, code := run(t, s, `echo x > /dev/null && head -c 4 /dev/urandom | wc -c && find / -xdev -type b 2>/dev/null; ls /dev`)
	if code != 0 {
		t.Fatalf("(%d) %s", code, out)
	}
	for _, bad := range []string{"loop", "sda", "vda", "nvme", "kmsg", "mem"} {
		if regexp.MustCompile(`(?m)^` + bad).MatchString(out) {
			t.Errorf("/dev shows %s: %s", bad, out)
		}
	}
	if !strings.HasPrefix(out, "4\n") {
		t.Errorf("/dev/urandom: %q", out)
	}
}

// No command makes a file setuid or setgid, or a device node (issue 22,
// findings 3 and 10: a setuid copy of a shell left in the workspace runs
// as the daemon's user for anyone).
func TestViewNoSetuidNoDevices(t *testing.T) {
	l := newLayout(t)
	s := l.spec(ModeWorkspaceWrite, l.work)
	for _, c := range []string{
		`cp /bin/sh ./sh && chmod 4755 ./sh`,
		`cp /bin/sh ./sh2 && chmod g+s ./sh2`,
		`python3 -c 'import os; os.close(os.open("sh3", os.O_CREAT|os.O_WRONLY, 0o4755))'`,
		`mknod ./null c 1 3`,
	} {
		if out, code := run(t, s, c); code == 0 {
			t.Errorf("%q succeeded: %s", c, out)
		}
	}
	ents, _ := os.ReadDir(l.work)
	for _, e := range ents {
		fi, _ := e.Info()
		if fi.Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeDevice) != 0 {
			t.Errorf("%s has mode %v", e.Name(), fi.Mode())
		}
	}
	if out, code := run(t, s, `mkfifo ./fifo && chmod 700 ./sh`); code != 0 {
		t.Errorf("a fifo or a plain chmod failed (%d): %s", code, out)
	}
}

// SysV and POSIX IPC objects stay in the command's IPC namespace and end
// with it (issue 22, finding 14).
func TestViewIPCNamespace(t *testing.T) {
	if _, err := exec.LookPath("ipcmk"); err != nil {
		t.Fatalf("ipcmk (util-linux) is needed: %v", err)
	}
	l := newLayout(t)
	s := l.spec(ModeWorkspaceWrite, l.work)
	out, code := run(t, s, `ipcmk -M 4096`)
	m := regexp.MustCompile(`id: (\d+)`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("ipcmk (%d): %s", code, out)
	}
	host, _ := exec.Command("ipcs", "-m").CombinedOutput()
	for _, line := range strings.Split(string(host), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] == m[1] && strings.Contains(line, "4096") {
			exec.Command("ipcrm", "-m", m[1]).Run()
			t.Fatalf("the command's shared memory segment %s outlives it: %s", m[1], line)
		}
	}
}

// Commands are the OOM killer's first choice (issue 22, finding 12).
func TestViewOOMScore(t *testing.T) {
	l := newLayout(t)
	if out, _ := run(t, l.spec(ModeWorkspaceWrite, l.work), `cat /proc/self/oom_score_adj`); strings.TrimSpace(out) != "1000" {
		t.Errorf("oom_score_adj %q, want 1000", out)
	}
}

// A hidden file (auth.token_file) shows empty wherever it is in the view
// (issue 22, finding 5), and a protected home reached through a bind
// mount inside the cwd is covered there too (finding 7).
func TestViewHiddenFilesAndAliases(t *testing.T) {
	l := newLayout(t)
	user := filepath.Join(l.root, "user")
	os.Mkdir(user, 0o755)
	token := filepath.Join(user, "token")
	os.WriteFile(token, []byte("TOKEN-FILE"), 0o600)
	s := l.spec(ModeWorkspaceWrite, l.work)
	s.Home = user
	if out, _ := run(t, s, `cat "`+token+`"`); out != "TOKEN-FILE" {
		t.Fatalf("without hiding, the token file shows %q (else this proves nothing)", out)
	}
	s.HiddenFiles = []string{token}
	if out, _ := run(t, s, `cat "`+token+`"`); strings.Contains(out, "TOKEN-FILE") {
		t.Errorf("the hidden token file shows %q", out)
	}
	needRoot(t, "the alias's bind mount")
	alias := filepath.Join(l.work, "alias")
	os.Mkdir(alias, 0o755)
	if err := syscall.Mount(l.home, alias, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind the home: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(alias, syscall.MNT_DETACH) })
	for _, c := range []string{`grep -q SECRET-TOKEN alias/daemon.json`, `grep -q DB alias/state.db`, `echo x >> alias/state.db`, `ls alias | grep -q config`} {
		if out, code := run(t, s, c); code == 0 {
			t.Errorf("%q through an alias of the home succeeded: %s", c, out)
		}
	}
	mustFile(t, filepath.Join(l.home, "state.db"), "DB")
}

// In workspace-write a repository's .git/config and .git/hooks stay
// read-only (issue 22, finding 9: core.fsmonitor or a hook runs code in
// the person's next git command); the rest of .git is writable.
func TestViewRepositoryConfigReadOnly(t *testing.T) {
	l := newLayout(t)
	if out, err := exec.Command("git", "init", "-q", l.work).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	cfg, _ := os.ReadFile(filepath.Join(l.work, ".git", "config"))
	s := l.spec(ModeWorkspaceWrite, l.work)
	for _, c := range []string{`git config core.fsmonitor "touch /tmp/x"`, `echo 'touch x' > .git/hooks/pre-commit`, `echo >> .git/config`,
		`mv .git .git.old`, `mv .git/hooks .git/h2`} {
		if out, code := run(t, s, c); code == 0 {
			t.Errorf("%q succeeded: %s", c, out)
		}
	}
	mustFile(t, filepath.Join(l.work, ".git", "config"), string(cfg))
	// A repository below the cwd (the cwd holds the person's projects).
	for _, sub := range []string{"app", "group/lib"} {
		repo := filepath.Join(l.work, sub)
		if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v %s", err, out)
		}
		for _, c := range []string{`git -C ` + sub + ` config core.fsmonitor "touch /tmp/x"`, `echo 'touch x' > ` + sub + `/.git/hooks/pre-commit`} {
			if out, code := run(t, s, c); code == 0 {
				t.Errorf("%q succeeded: %s", c, out)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(l.work, ".git", "HEAD")); err != nil {
		t.Errorf(".git was emptied: %v", err)
	}
	if out, code := run(t, s, `echo a > f && git add f && git -c user.name=a -c user.email=a@b commit -qm one && git status --short`); code != 0 {
		t.Errorf("everyday git fails (%d): %s", code, out)
	}
}

// When a writable location contains the user's home, its shell start-up
// files stay read-only and none can be created (issue 22, finding 9);
// the rest of the home stays writable.
func TestViewHomeStartupFilesReadOnly(t *testing.T) {
	l := newLayout(t)
	user := filepath.Join(l.work, "me")
	os.MkdirAll(filepath.Join(user, "proj"), 0o755)
	os.WriteFile(filepath.Join(user, ".bashrc"), []byte("# rc\n"), 0o644)
	os.WriteFile(filepath.Join(user, "notes"), []byte("n\n"), 0o644)
	s := l.spec(ModeWorkspaceWrite, user)
	s.Home = user
	os.MkdirAll(filepath.Join(user, ".config", "app"), 0o755)
	os.MkdirAll(filepath.Join(user, ".local", "share"), 0o755)
	for _, c := range []string{`echo 'touch /tmp/x' >> ~/.bashrc`, `echo evil > ~/.bash_profile`, `echo evil > ~/.profile`,
		`mkdir -p ~/.config/fish && echo x > ~/.config/fish/config.fish`,
		`mkdir -p ~/.config/systemd/user && echo x > ~/.config/systemd/user/evil.service`,
		`mkdir -p ~/.local/bin && printf '#!/bin/sh\n' > ~/.local/bin/git`} {
		if out, code := run(t, s, "HOME="+user+"; "+c); code == 0 {
			t.Errorf("%q succeeded: %s", c, out)
		}
	}
	mustFile(t, filepath.Join(user, ".bashrc"), "# rc\n")
	if _, err := os.Stat(filepath.Join(user, ".bash_profile")); err == nil {
		t.Error(".bash_profile was created")
	}
	if out, code := run(t, s, `echo m >> notes && echo p > proj/f && mkdir proj/d && echo c > .config/app/c`); code != 0 {
		t.Errorf("writes in the home fail (%d): %s", code, out)
	}
	mustFile(t, filepath.Join(user, "proj", "f"), "p\n")
}
