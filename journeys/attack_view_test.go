package journeys

// The allowlisted view (issue 22): one journey per finding of the attack
// round that runs as root (CI runs the journeys as root), on the real
// binary, default config with approvals manual. The fake model issues each
// command; where the classifier asks, sbRun approves it once: the view must
// hold also for an approved command. Every command starts with an echo of
// viewRan, so that a command that did not run at all (a setup failure, which
// fails closed) is reported instead of passing for a held wall.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/fixtures"
)

// viewRan is echoed first by every command of these journeys.
const viewRan = "sessiond-view-ran"

// viewCfg is the config of every view journey (plus extra lines).
const viewCfg = "approvals: {mode: manual, timeout: 60}"

// viewEnv is a daemon with the default sandbox and one session.
type viewEnv struct {
	t   *testing.T
	d   *fixtures.Daemon
	c   *fixtures.Client
	m   *fixtures.FakeModel
	sid string
	cwd string
	n   int
}

type viewOpts struct {
	cfg string   // extra config.yaml lines
	env []string // the daemon's extra environment
	cwd string   // the session's cwd; "" is a fresh t.TempDir()
}

// viewRoot skips a journey of a root-only finding when not run as root.
func viewRoot(t *testing.T) {
	t.Helper()
	needRoot(t, "a root-only finding of issue 22")
}

// viewNeed fails when a program the journey uses is not installed.
func viewNeed(t *testing.T, prog string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		t.Fatalf("this journey needs %s installed: %v", prog, err)
	}
	return p
}

// viewPython is the system python3 (a pyenv shim needs its tree, which is
// beside the point of the attack journeys).
func viewPython() string {
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return "python3"
}

func viewRand() string { return strconv.FormatUint(rand.Uint64(), 36) }

func startView(t *testing.T, o viewOpts) *viewEnv {
	t.Helper()
	cfg := viewCfg
	if o.cfg != "" {
		cfg += "\n" + o.cfg
	}
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, cfg), Env: o.env})
	v := &viewEnv{t: t, d: d, c: d.Dial(t), m: m}
	if o.cwd == "" {
		o.cwd = t.TempDir()
	}
	v.cwd = o.cwd
	v.sid = v.session(o.cwd)
	return v
}

// session creates and resumes a session in cwd.
func (v *viewEnv) session(cwd string) string {
	v.t.Helper()
	s := createSession(v.t, v.c, map[string]any{"cwd": cwd})
	resume(v.t, v.c, s.SessionID)
	return s.SessionID
}

// viewResult is a terminal tool result.
type viewResult struct {
	ExitCode       int    `json:"exit_code"`
	Output         string `json:"output"`
	Sandbox        string `json:"sandbox"`
	SandboxBlocked bool   `json:"sandbox_blocked"`
	raw            string
}

func (r viewResult) String() string { return r.raw }

// run has the fake model issue command in the env's session (see runIn).
func (v *viewEnv) run(what, command string) viewResult {
	v.t.Helper()
	return v.runIn(v.sid, what, command)
}

// runIn has the fake model issue "echo viewRan; command" in session sid,
// approves every prompt once, and returns the tool result. A command that
// did not run in the sandbox (setup failed, or it ran unsandboxed) is an
// error: the journey's check would prove nothing.
func (v *viewEnv) runIn(sid, what, command string) viewResult {
	v.t.Helper()
	v.n++
	text := fmt.Sprintf("view %d: %s", v.n, what)
	raw, _ := sbRun(v.t, v.d, v.c, v.m, sid, text, "echo "+viewRan+"; "+command, false)
	r := viewResult{raw: raw}
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		v.t.Fatalf("%s: the tool result is not a terminal result: %v: %s", what, err, raw)
	}
	r.raw = raw
	if !strings.Contains(r.Output, viewRan) || strings.Contains(r.Output, "sessiond sandbox:") {
		v.t.Errorf("%s: the command did not run (a setup failure fails closed, but then this check proves nothing): %s", what, raw)
	}
	if r.Sandbox == "" {
		v.t.Errorf("%s: the command ran unsandboxed: %s", what, raw)
	}
	return r
}

// TestViewSameUserTmuxServer (finding 2): a tmux server of the daemon's
// user listens on the real /tmp, by an explicit socket path and by the
// default socket directory (/tmp/tmux-UID) with a name of its own. A
// command (rated safe) asking it for a window must not reach it: nothing
// runs outside the sandbox.
func TestViewSameUserTmuxServer(t *testing.T) {
	viewRoot(t)
	tmux := viewNeed(t, "tmux")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TMUX=") && !strings.HasPrefix(kv, "TMUX_TMPDIR=") {
			env = append(env, kv)
		}
	}
	v := startView(t, viewOpts{})
	outside := t.TempDir()
	// tmux's default socket directory: kill-server leaves the socket there,
	// and the directory when this journey made it.
	defDir := fmt.Sprintf("/tmp/tmux-%d", os.Geteuid())
	if _, err := os.Stat(defDir); os.IsNotExist(err) {
		t.Cleanup(func() { os.Remove(defDir) }) // only when empty
	}
	for _, sock := range [][]string{
		{"-S", filepath.Join(t.TempDir(), "tmux.sock")},
		{"-L", "sessiond-journey-" + viewRand()},
	} {
		t.Run(sock[0], func(t *testing.T) {
			host := func(args ...string) string {
				t.Helper()
				cmd := exec.Command(tmux, append(append([]string{}, sock...), args...)...)
				cmd.Env = env
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("tmux %v: %v: %s", args, err, out)
				}
				return string(out)
			}
			host("-f", "/dev/null", "new-session", "-d", "-s", "journey", "sleep 600")
			t.Cleanup(func() {
				cmd := exec.Command(tmux, append(append([]string{}, sock...), "kill-server")...)
				cmd.Env = env
				cmd.Run()
				if sock[0] == "-L" {
					os.Remove(filepath.Join(defDir, sock[1]))
				}
			})
			host("set-option", "-g", "remain-on-exit", "on") // a window's pane stays, dead, when its command ends
			proof := filepath.Join(outside, "tmux"+sock[0])
			res := v.run("tmux "+sock[0], fmt.Sprintf("tmux %s %s new-window -d 'touch %s'", sock[0], sock[1], proof))
			// new-window returns once the window exists: wait for every
			// pane but the first to end, then look.
			var panes string
			fixtures.Eventually(t, wait, "the panes the command made to end", func() bool {
				panes = host("list-panes", "-a", "-F", "#{pane_dead} #{pane_start_command}")
				lines := strings.Split(strings.TrimSpace(panes), "\n")
				for _, l := range lines[1:] {
					if !strings.HasPrefix(l, "1 ") {
						return false
					}
				}
				return true
			})
			if _, err := os.Stat(proof); err == nil {
				t.Errorf("a sandboxed command had the user's tmux server (%s %s) run a command outside the sandbox: %s exists; panes:\n%s; result: %s",
					sock[0], sock[1], proof, panes, res)
			} else if strings.Count(strings.TrimSpace(panes), "\n") > 0 {
				t.Errorf("a sandboxed command reached the user's tmux server (%s %s) and opened a window; panes:\n%s; result: %s", sock[0], sock[1], panes, res)
			}
		})
	}
}

// viewMeta is what a metadata write changes.
type viewMeta struct {
	mode     os.FileMode
	uid, gid uint32
	mtime    time.Time
	xattrs   string
}

func viewStat(t *testing.T, p string) viewMeta {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	var s unix.Stat_t
	if err := unix.Lstat(p, &s); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(p, buf)
	if err != nil {
		n = 0
	}
	return viewMeta{mode: fi.Mode(), uid: s.Uid, gid: s.Gid, mtime: fi.ModTime(), xattrs: string(buf[:n])}
}

// TestViewMetadataWritesOutsideWritableRoots (findings 3 and 10): files the
// view shows read-only (in the daemon user's home, in /etc) keep their
// mode, owner, times and extended attributes whatever a command does; and
// no command leaves a setuid or setgid file, in the cwd or its $TMPDIR.
func TestViewMetadataWritesOutsideWritableRoots(t *testing.T) {
	viewRoot(t)
	userHome := t.TempDir()
	inHome := filepath.Join(userHome, ".cache", "sessiond-journey-"+viewRand())
	if err := os.MkdirAll(inHome, 0o755); err != nil {
		t.Fatal(err)
	}
	inEtc, err := os.MkdirTemp("/etc", "sessiond-journey-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(inEtc) })
	if err := os.Chmod(inEtc, 0o755); err != nil {
		t.Fatal(err)
	}
	v := startView(t, viewOpts{env: []string{"HOME=" + userHome}})
	py := viewPython()
	_, errSetfattr := exec.LookPath("setfattr")
	if errSetfattr != nil {
		t.Logf("setfattr is not installed: python's os.setxattr writes the extended attribute")
	}
	for _, dir := range []string{inHome, inEtc} {
		f := filepath.Join(dir, "f")
		if err := os.WriteFile(f, []byte("keep me"), 0o644); err != nil {
			t.Fatal(err)
		}
		then := time.Now().Add(-time.Hour).Truncate(time.Second)
		if err := os.Chtimes(f, then, then); err != nil {
			t.Fatal(err)
		}
		before := viewStat(t, f)
		attacks := []string{
			"chmod 600 " + f,
			"chmod u+s " + f,
			"chown 65534:65534 " + f,
			"touch -d 2000-01-01 " + f,
			fmt.Sprintf(`%s -c "import os; os.setxattr('%s', 'user.sessiond-journey', b'1')"`, py, f),
		}
		if errSetfattr == nil {
			attacks = append(attacks, "setfattr -n user.sessiond-journey -v 1 "+f)
		}
		for _, a := range attacks {
			res := v.run(a, a)
			if after := viewStat(t, f); after != before {
				t.Errorf("%q changed the metadata of %s (outside every writable root): %+v, was %+v; result: %s", a, f, after, before, res)
				// Undo it, so that the next check is its own.
				os.Chown(f, int(before.uid), int(before.gid))
				os.Chmod(f, 0o644)
				os.Chtimes(f, then, then)
				unix.Removexattr(f, "user.sessiond-journey")
			}
		}
	}

	// Setuid and setgid files (finding 10): none is left, made in any way.
	for _, a := range []struct{ cmd, file string }{
		{"cp /bin/sh sh-4755 && chmod 4755 sh-4755", "sh-4755"},
		{"cp /bin/sh sh-us && chmod u+s sh-us", "sh-us"},
		{"cp /bin/sh sh-gs && chmod g+s sh-gs", "sh-gs"},
		{"install -m 6755 /bin/sh sh-install", "sh-install"},
		{py + ` -c "import os, shutil; shutil.copy('/bin/sh', 'sh-fchmod'); fd = os.open('sh-fchmod', os.O_RDONLY); os.fchmod(fd, 0o4755)"`, "sh-fchmod"},
	} {
		res := v.run(a.cmd, a.cmd)
		if fi, err := os.Stat(filepath.Join(v.cwd, a.file)); err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%q left a %v file in the cwd (a setuid copy of a shell for any local user); result: %s", a.cmd, fi.Mode(), res)
		}
	}
	cmd := `cp /bin/sh "$TMPDIR/x" && chmod u+s "$TMPDIR/x"; stat -c 'MODE:%a' "$TMPDIR/x"`
	if res := v.run("setuid in $TMPDIR", cmd); regexp.MustCompile(`MODE:[2-7]\d\d\d`).MatchString(res.Output) {
		t.Errorf("%q made a setuid file in $TMPDIR: %s", cmd, res)
	}
}

// viewRootDevice returns the source of the mount on / ("" when it is not a
// device node).
func viewRootDevice(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	dev := ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[4] != "/" {
			continue
		}
		_, post, ok := strings.Cut(line, " - ")
		if pf := strings.Fields(post); ok && len(pf) >= 2 && strings.HasPrefix(pf[1], "/dev/") {
			dev = pf[1]
		}
	}
	return dev
}

// viewLoopDevice makes a small ext4 image holding the file "secret" (with
// content secret), attaches it to a free loop device and returns the
// device ("" when this host cannot: the listing check still runs). The
// device is detached at cleanup.
func viewLoopDevice(t *testing.T, secret string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "root"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "root", "secret"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 4<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-d", filepath.Join(dir, "root"), img).CombinedOutput(); err != nil {
		t.Logf("mkfs.ext4: %v: %s (no loop device check)", err, out)
		return ""
	}
	out, err := exec.Command("losetup", "-f", "--show", img).CombinedOutput()
	if err != nil {
		t.Logf("losetup: %v: %s (no loop device check)", err, out)
		return ""
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", dev, err, out)
		}
	})
	if out, _ := exec.Command("debugfs", "-R", "cat /secret", dev).CombinedOutput(); !strings.Contains(string(out), secret) {
		t.Logf("debugfs cannot read %s unsandboxed either: %s", dev, out)
	}
	return dev
}

// TestViewNoBlockDevices (finding 4): the command's /dev holds no block
// device (the host's has loop devices and the root disk), so debugfs
// cannot read a filesystem from the device under the view (here one on a
// loop device the test attaches, holding a secret; and the root disk);
// mknod of a device fails.
func TestViewNoBlockDevices(t *testing.T) {
	viewRoot(t)
	viewNeed(t, "debugfs")
	secret := "view-block-secret-" + viewRand()
	loop := viewLoopDevice(t, secret)
	dev := viewRootDevice(t)
	v := startView(t, viewOpts{})
	list := `for f in $(find / /dev -xdev -type b 2>/dev/null); do echo "BLOCK:$f"; done; for f in /dev/loop0 ` + loop + " " + dev +
		`; do test -b "$f" && echo "BLOCK:$f"; done; ls -l /dev`
	if res := v.run("list block devices", list); strings.Contains(res.Output, "BLOCK:") {
		t.Errorf("the command's view has block devices: %s", res)
	}
	if loop != "" {
		if res := v.run("debugfs a loop device", "debugfs -R 'cat /secret' "+loop); strings.Contains(res.Output, secret) {
			t.Errorf("debugfs read a file from the block device %s: %s", loop, res)
		}
	}
	if dev != "" {
		cmd := fmt.Sprintf("debugfs -R 'stat <2>' %s; debugfs -R 'cat %s' %s", dev, filepath.Join(v.d.Home, "daemon.json"), dev)
		if res := v.run("debugfs the root disk", cmd); strings.Contains(res.Output, "Type: directory") || strings.Contains(res.Output, v.d.Desc.Token) {
			t.Errorf("debugfs read the disk under the view: %s", res)
		}
	}
	res := v.run("mknod", "mknod blk b 7 0; mknod chr c 1 1")
	for _, n := range []string{"blk", "chr"} {
		if fi, err := os.Lstat(filepath.Join(v.cwd, n)); err == nil && fi.Mode()&os.ModeDevice != 0 {
			t.Errorf("a command made the device node %s (%v) in its cwd: %s", n, fi.Mode(), res)
		}
	}
}

// TestViewTokenFileNotInView (finding 5): auth.token_file is not in the
// command's view, where docs/scale-out.md suggests it (under /etc) and
// inside the session's cwd: no command reads, copies or moves it.
func TestViewTokenFileNotInView(t *testing.T) {
	viewRoot(t)
	t.Run("under /etc", func(t *testing.T) {
		dir, err := os.MkdirTemp("/etc", "sessiond-journey-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		token := filepath.Join(dir, "token")
		v := startView(t, viewOpts{cfg: "auth: {token_file: " + token + "}"})
		if res := v.run("cat the token file", "cat "+token+"; cat "+dir+"/*"); strings.Contains(res.Output, v.d.Desc.Token) {
			t.Errorf("a command read auth.token_file %s: %s", token, res)
		}
	})
	t.Run("in the cwd", func(t *testing.T) {
		cwd := t.TempDir()
		token := filepath.Join(cwd, ".sessiond-token")
		v := startView(t, viewOpts{cfg: "auth: {token_file: " + token + "}", cwd: cwd})
		tok := v.d.Desc.Token
		for _, cmd := range []string{
			"cat .sessiond-token; cat " + token,
			"cp .sessiond-token copy; cat copy",
			"mv .sessiond-token moved; cat moved",
		} {
			if res := v.run(cmd, cmd); strings.Contains(res.Output, tok) {
				t.Errorf("%q read auth.token_file in the cwd: %s", cmd, res)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(cwd, "copy")); strings.Contains(string(b), tok) {
			t.Errorf("a command copied the token into its cwd")
		}
		if b, err := os.ReadFile(token); err != nil || !strings.Contains(string(b), tok) {
			t.Errorf("the token file was moved or changed by a command: %q, %v", b, err)
		}
	})
}

// TestViewHomeAliasMount (finding 7): the daemon's home is reachable
// through a bind mount of it inside the session's cwd; through it no
// command reads daemon.json, writes state.db or config.yaml, or creates a
// file in the home.
func TestViewHomeAliasMount(t *testing.T) {
	viewRoot(t)
	cwd := t.TempDir() // made first: removed after the alias is unmounted
	v := startView(t, viewOpts{cwd: cwd})
	alias := filepath.Join(cwd, "alias")
	if err := os.Mkdir(alias, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(v.d.Home, alias, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s on %s: %v", v.d.Home, alias, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(alias, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", alias, err)
		}
	})
	if _, err := os.Stat(filepath.Join(alias, "daemon.json")); err != nil {
		t.Fatalf("the alias does not show the home: %v", err)
	}
	cfgBefore, _ := os.ReadFile(filepath.Join(v.d.Home, "config.yaml"))
	if res := v.run("read through the alias", "cat alias/daemon.json"); strings.Contains(res.Output, v.d.Desc.Token) {
		t.Errorf("a command read daemon.json through a bind mount of the home in its cwd: %s", res)
	}
	res := v.run("write state.db through the alias",
		`sqlite3 alias/state.db "INSERT INTO approval_allowlist(pattern, created_at) VALUES('alias-rule', 'x')"`)
	if n := countRows(t, v.d, `pattern = 'alias-rule'`); n != 0 {
		t.Errorf("a command wrote the daemon's allowlist through the alias (%d rows): %s", n, res)
	}
	res = v.run("append config.yaml through the alias", "echo '# approvals: {mode: off}' >> alias/config.yaml; echo pwned > alias/pwned")
	if b, _ := os.ReadFile(filepath.Join(v.d.Home, "config.yaml")); string(b) != string(cfgBefore) {
		t.Errorf("a command changed config.yaml through the alias: %q; result: %s", b, res)
	}
	if _, err := os.Stat(filepath.Join(v.d.Home, "pwned")); err == nil {
		t.Errorf("a command created a file in the daemon's home through the alias: %s", res)
	}
}

// TestViewWorkspacePersistence (finding 9): in workspace-write, a command
// plants nothing the person's next git or shell runs unsandboxed: the
// .git/config and .git/hooks/ of the cwd and of a repository below it stay
// as they were (written directly, by a script written then run, by
// renaming them or .git away), and with the cwd = the user's home its
// shell start-up files are neither changed nor created.
func TestViewWorkspacePersistence(t *testing.T) {
	viewRoot(t)
	outside := t.TempDir()
	proof := filepath.Join(outside, "planted-ran")
	t.Run("git", func(t *testing.T) {
		cwd := t.TempDir()
		if out, err := exec.Command("git", "init", "-q", cwd).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v: %s", err, out)
		}
		gitCfg := filepath.Join(cwd, ".git", "config")
		before, err := os.ReadFile(gitCfg)
		if err != nil {
			t.Fatal(err)
		}
		v := startView(t, viewOpts{cwd: cwd})
		check := func(what string, res viewResult) {
			t.Helper()
			if b, _ := os.ReadFile(gitCfg); string(b) != string(before) {
				t.Errorf("%s changed .git/config to %q: %s", what, b, res)
			}
			ents, _ := os.ReadDir(filepath.Join(cwd, ".git", "hooks"))
			for _, e := range ents {
				if !strings.HasSuffix(e.Name(), ".sample") {
					t.Errorf("%s planted the hook .git/hooks/%s: %s", what, e.Name(), res)
				}
			}
			// Undo whatever got through, so that the next check is its own.
			for _, d := range []string{".git", filepath.Join(".git", "hooks")} {
				if _, err := os.Stat(filepath.Join(cwd, d+".old")); err == nil {
					os.RemoveAll(filepath.Join(cwd, d))
					if err := os.Rename(filepath.Join(cwd, d+".old"), filepath.Join(cwd, d)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := os.WriteFile(gitCfg, before, 0o644); err != nil {
				t.Fatal(err)
			}
			ents, _ = os.ReadDir(filepath.Join(cwd, ".git", "hooks"))
			for _, e := range ents {
				if !strings.HasSuffix(e.Name(), ".sample") {
					os.Remove(filepath.Join(cwd, ".git", "hooks", e.Name()))
				}
			}
		}
		check("git config core.fsmonitor", v.run("fsmonitor", "git config core.fsmonitor 'touch "+proof+"'"))
		check("a hook written", v.run("hook", `printf '#!/bin/sh\ntouch `+proof+`\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit`))
		v.run("write a script", `printf 'git config core.fsmonitor "touch `+proof+`"\n' > setup.sh`)
		check("a script written then run", v.run("run the script", "sh setup.sh"))
		check(".git/hooks renamed away", v.run("rename hooks",
			`mv .git/hooks .git/hooks.old; mkdir -p .git/hooks; printf '#!/bin/sh\ntouch `+proof+`\n' > .git/hooks/post-checkout; chmod +x .git/hooks/post-checkout`))
		check(".git renamed away", v.run("rename .git",
			`mv .git .git.old && mkdir .git && cp -a .git.old/. .git/ && git config core.fsmonitor 'touch `+proof+`'`))
	})
	t.Run("git repository below the cwd", func(t *testing.T) {
		// The session works in a directory of repositories (~/src, say):
		// the next git status in ~/src/app runs what app/.git holds.
		cwd := t.TempDir()
		repo := filepath.Join(cwd, "app")
		if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v: %s", err, out)
		}
		gitCfg := filepath.Join(repo, ".git", "config")
		before, err := os.ReadFile(gitCfg)
		if err != nil {
			t.Fatal(err)
		}
		v := startView(t, viewOpts{cwd: cwd})
		res := v.run("fsmonitor below", "git -C app config core.fsmonitor 'touch "+proof+"'")
		if b, _ := os.ReadFile(gitCfg); string(b) != string(before) {
			t.Errorf("a command changed app/.git/config to %q: %s", b, res)
		}
		res = v.run("hook below", `printf '#!/bin/sh\ntouch `+proof+`\n' > app/.git/hooks/pre-commit && chmod +x app/.git/hooks/pre-commit`)
		if _, err := os.Stat(filepath.Join(repo, ".git", "hooks", "pre-commit")); err == nil {
			t.Errorf("a command planted app/.git/hooks/pre-commit: %s", res)
		}
	})
	t.Run("shell start-up files", func(t *testing.T) {
		home := t.TempDir()
		existing := map[string]string{".bashrc": "# journey bashrc\n", ".bash_profile": "# journey bash_profile\n", ".zshrc": "# journey zshrc\n"}
		for n, c := range existing {
			if err := os.WriteFile(filepath.Join(home, n), []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// Directories every home has: what runs code lies below them.
		for _, d := range []string{".config", ".local", "work"} {
			if err := os.Mkdir(filepath.Join(home, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		v := startView(t, viewOpts{env: []string{"HOME=" + home}, cwd: home})
		check := func(what string, res viewResult) {
			t.Helper()
			// The sandbox makes these directories, empty and read-only to
			// commands, so that none can be filled: anything in them is the
			// attack's.
			for _, n := range []string{".config/systemd", ".local/bin"} {
				if ents, _ := os.ReadDir(filepath.Join(home, n)); len(ents) > 0 {
					t.Errorf("%s created %s in ~/%s: %s", what, ents[0].Name(), n, res)
					os.RemoveAll(filepath.Join(home, n))
				}
			}
			for _, n := range []string{".bashrc", ".bash_profile", ".zshrc", ".profile"} {
				b, err := os.ReadFile(filepath.Join(home, n))
				if want, ok := existing[n]; ok && string(b) != want {
					t.Errorf("%s changed ~/%s to %q (%v): %s", what, n, b, err, res)
				} else if !ok && err == nil {
					t.Errorf("%s created ~/%s holding %q: %s", what, n, b, res)
				}
			}
			// Undo whatever got through, so that the next check is its own.
			os.Remove(filepath.Join(home, ".profile"))
			os.Remove(filepath.Join(home, ".bashrc.old"))
			for n, c := range existing {
				if err := os.WriteFile(filepath.Join(home, n), []byte(c), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		check("append to ~/.bashrc", v.run("bashrc", "echo 'touch "+proof+"' >> ~/.bashrc"))
		check("append to the others", v.run("others", "for f in .bash_profile .zshrc; do echo 'touch "+proof+"' >> ~/$f; done"))
		check("create ~/.profile", v.run("profile", "printf 'touch "+proof+"\\n' > ~/.profile"))
		check("rename ~/.bashrc away", v.run("rename bashrc", "mv ~/.bashrc ~/.bashrc.old; printf 'touch "+proof+"\\n' > ~/.bashrc"))
		check("a user unit, a command on PATH", v.run("config", "mkdir -p ~/.config/systemd/user ~/.local/bin; "+
			"printf '[Service]\\nExecStart=/bin/touch "+proof+"\\n' > ~/.config/systemd/user/p.service; "+
			"printf '#!/bin/sh\\ntouch "+proof+"\\n' > ~/.local/bin/git; chmod +x ~/.local/bin/git"))
		v.run("write a script", "printf 'echo touch "+proof+" >> ~/.bashrc\\n' > work/rc.sh")
		if _, err := os.Stat(filepath.Join(home, "work", "rc.sh")); err != nil {
			t.Errorf("the script could not be written in ~/work (the next check proves nothing): %v", err)
		}
		check("a script written then run", v.run("run the script", "sh work/rc.sh"))
	})
}

// TestViewOOMScoreAdj (finding 12): commands are the OOM killer's first
// choice, not the daemon.
func TestViewOOMScoreAdj(t *testing.T) {
	viewRoot(t)
	v := startView(t, viewOpts{})
	res := v.run("oom_score_adj", "cat /proc/self/oom_score_adj")
	if got := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(res.Output), viewRan)); got != "1000" {
		t.Errorf("a command's oom_score_adj is %q, want 1000: %s", got, res)
	}
}

// TestViewSessionTmpIsolation (finding 13): while session A's command runs
// (it waits on a fifo the test holds), a command of session B neither
// lists nor reads what A's command put in its $TMPDIR; nor does it see a
// file in the real /tmp.
func TestViewSessionTmpIsolation(t *testing.T) {
	viewRoot(t)
	secret := "view-secret-content-" + viewRand()
	real, err := os.CreateTemp("/tmp", "sessiond-journey-visible-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(real.Name()) })
	realSecret := "view-real-tmp-content-" + viewRand()
	real.WriteString(realSecret)
	real.Close()

	v := startView(t, viewOpts{})
	cwdB := t.TempDir()
	sidB := v.session(cwdB)
	gate := filepath.Join(v.cwd, "gate")
	if err := unix.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	textA := "view: session A holds its $TMPDIR"
	v.m.On(textA, fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{atkTerm(
		`echo ` + viewRan + `; echo ` + secret + ` > "$TMPDIR/view-secret-a"; echo "$TMPDIR" > tmpdir-a.txt; read x < gate; echo released`)}},
		fixtures.Reply{Text: "done"})
	rA := submit(t, v.c, v.sid, "view-a", textA)
	answered := map[string]bool{}
	var tmpA string
	fixtures.Eventually(t, wait, "session A's command to write its $TMPDIR", func() bool {
		for _, e := range v.c.Events() {
			if e.AdmissionID == rA.AdmissionID && e.Type == "turn.completed" {
				t.Fatalf("session A's turn ended before the test released it: %v", toolResults(v.m, textA))
			}
			if e.AdmissionID != rA.AdmissionID || e.Type != "prompt.opened" {
				continue
			}
			var p struct {
				Prompt prompt `json:"prompt"`
			}
			json.Unmarshal(e.Payload, &p)
			if !answered[p.Prompt.PromptID] {
				answered[p.Prompt.PromptID] = true
				if _, err := answerApproval(t, v.c, v.sid, p.Prompt, "once"); err != nil {
					t.Fatalf("approve once: %v", err)
				}
			}
		}
		b, _ := os.ReadFile(filepath.Join(v.cwd, "tmpdir-a.txt"))
		tmpA = strings.TrimSpace(string(b))
		return strings.HasSuffix(string(b), "\n") && tmpA != ""
	})
	// Release A (its read of the fifo) also when the journey fails first.
	t.Cleanup(func() {
		if f, err := os.OpenFile(gate, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
			f.WriteString("go\n")
			f.Close()
		}
	})

	cmd := fmt.Sprintf(`ls -a /tmp | sed 's/^/TMP:/'; ls -a %s | sed 's/^/LS:/'; cat %s/view-secret-a; cat %s`,
		tmpA, tmpA, real.Name())
	res := v.runIn(sidB, "session B looks", cmd)
	if strings.Contains(res.Output, secret) || strings.Contains(res.Output, "LS:view-secret-a") {
		t.Errorf("session B's command listed or read session A's $TMPDIR (%s): %s", tmpA, res)
	}
	if strings.Contains(res.Output, "TMP:"+filepath.Base(tmpA)) {
		t.Errorf("session B's command sees session A's $TMPDIR in /tmp: %s", res)
	}
	if strings.Contains(res.Output, realSecret) || strings.Contains(res.Output, "TMP:"+filepath.Base(real.Name())) {
		t.Errorf("a command sees %s of the real /tmp: %s", real.Name(), res)
	}
	var f *os.File
	fixtures.Eventually(t, wait, "session A's command to wait on the fifo", func() bool {
		var err error
		f, err = os.OpenFile(gate, os.O_WRONLY|unix.O_NONBLOCK, 0)
		return err == nil
	})
	f.WriteString("go\n")
	f.Close()
	if out := waitTurn(t, v.c, rA.AdmissionID); out != "completed" {
		t.Fatalf("session A's turn: %s", out)
	}
	if r := toolResults(v.m, textA); len(r) == 0 || !strings.Contains(r[len(r)-1], "released") {
		t.Errorf("session A's command did not run to its end: %v", r)
	}
}

// viewSysV returns the ids of the host's SysV objects of kind ("shm",
// "msg", "sem") whose column col (0-based, of /proc/sysvipc/KIND) is val.
func viewSysV(t *testing.T, kind string, col int, val string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/sysvipc/" + kind)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, line := range strings.Split(string(b), "\n")[1:] {
		if f := strings.Fields(line); len(f) > col && f[col] == val {
			ids = append(ids, f[1])
		}
	}
	return ids
}

// viewCString is s as a NUL-terminated C string.
func viewCString(s string) *byte {
	p, err := unix.BytePtrFromString(s)
	if err != nil {
		panic(err)
	}
	return p
}

// TestViewIPCNamespace (finding 14): SysV shared memory, message queues and
// semaphores, and POSIX message queues and shared memory a command makes
// are gone after it: the host does not have them.
func TestViewIPCNamespace(t *testing.T) {
	viewRoot(t)
	viewNeed(t, "ipcmk")
	size := strconv.Itoa(40961 + rand.IntN(10000))
	perms := fmt.Sprintf("6%d%d", rand.IntN(8), 1+rand.IntN(7)) // never 600: the queue's and semaphores' mark
	nsems := strconv.Itoa(7 + rand.IntN(200))
	name := "sessiond-journey-" + viewRand()
	leaked := func() (shm, msg, sem []string) {
		return viewSysV(t, "shm", 3, size), viewSysV(t, "msg", 2, perms), viewSysV(t, "sem", 3, nsems)
	}
	t.Cleanup(func() { // remove only what this journey made
		shm, msg, sem := leaked()
		for _, id := range shm {
			exec.Command("ipcrm", "-m", id).Run()
		}
		for _, id := range msg {
			exec.Command("ipcrm", "-q", id).Run()
		}
		for _, id := range sem {
			exec.Command("ipcrm", "-s", id).Run()
		}
		cname := viewCString(name)
		unix.Syscall(unix.SYS_MQ_UNLINK, uintptr(unsafe.Pointer(cname)), 0, 0)
		runtime.KeepAlive(cname)
		os.Remove("/dev/shm/" + name)
	})
	if shm, msg, sem := leaked(); len(shm)+len(msg)+len(sem) > 0 {
		t.Fatalf("the host already has objects with this journey's marks: %v %v %v", shm, msg, sem)
	}
	v := startView(t, viewOpts{})
	res := v.run("SysV IPC", fmt.Sprintf("ipcmk -M %s -p 0%s; ipcmk -Q -p 0%s; ipcmk -S %s -p 0%s; ipcs", size, perms, perms, nsems, perms))
	if !strings.Contains(res.Output, "Shared memory id:") {
		t.Logf("ipcmk made nothing in the command (then nothing can outlive it): %s", res)
	}
	if shm, msg, sem := leaked(); len(shm)+len(msg)+len(sem) > 0 {
		t.Errorf("SysV objects of a command outlive it on the host: shm %v, msg %v, sem %v; result: %s", shm, msg, sem, res)
	}
	res = v.run("POSIX IPC", fmt.Sprintf(`%s -c "import ctypes, os; rt = ctypes.CDLL('librt.so.1', use_errno=True); print('mq_open', rt.mq_open(b'/%s', os.O_CREAT | os.O_RDWR, 0o600, None), ctypes.get_errno())"; echo x > /dev/shm/%s`,
		viewPython(), name, name))
	cname := viewCString(name)
	fd, _, errno := unix.Syscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(cname)), uintptr(unix.O_RDONLY), 0, 0, 0, 0)
	runtime.KeepAlive(cname)
	if errno == 0 {
		unix.Close(int(fd))
		t.Errorf("a POSIX message queue of a command (/%s) outlives it on the host (fd %d): %s", name, fd, res)
	} else if errno != unix.ENOENT {
		t.Logf("mq_open on the host: %v", errno)
	}
	if _, err := os.Stat("/dev/shm/" + name); err == nil {
		t.Errorf("a POSIX shared memory object of a command (/dev/shm/%s) outlives it on the host: %s", name, res)
	}
}

// TestViewHeldEverydayWork: the everyday path keeps working in the view:
// the toolchains on PATH, git in a repository, the home read, writes in
// the cwd and $TMPDIR, /dev/null, pipelines, nested shells, ps.
func TestViewHeldEverydayWork(t *testing.T) {
	userHome := t.TempDir()
	if err := os.WriteFile(filepath.Join(userHome, "home-marker"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cwd := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = cwd
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(cwd, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "a.txt")
	git("commit", "-q", "-m", "first")
	v := startView(t, viewOpts{env: []string{"HOME=" + userHome}, cwd: cwd})
	for _, w := range []struct{ cmd, want string }{
		{"go version", "go version go"},
		{"python3 -c 'print(1)'", "\n1"},
		{"git status", "On branch"},
		{"git log --oneline | wc -l", "\n1"},
		{"ls ~", "home-marker"},
		{"echo in-cwd > cwd-file.txt && cat cwd-file.txt", "in-cwd"},
		{`echo in-tmp > "$TMPDIR/t" && cat "$TMPDIR/t" && mktemp`, "in-tmp"},
		{"ls /nonexistent 2>/dev/null; echo discarded > /dev/null; cat /dev/null; echo null-ok", "null-ok"},
		{"head -c 8 /dev/urandom | wc -c", "\n8"},
		{"printf 'b\\na\\n' | sort | head -1", "\na"},
		{"sh -c 'echo nested'", "nested"},
		{"ps", "PID"},
		{"cat /etc/os-release", "ID="},
	} {
		res := v.run(w.cmd, w.cmd)
		if res.ExitCode != 0 || !strings.Contains(res.Output, w.want) || res.SandboxBlocked {
			t.Errorf("%q: want exit 0 and %q in the output: %s", w.cmd, w.want, res)
		}
	}
	if b, err := os.ReadFile(filepath.Join(cwd, "cwd-file.txt")); err != nil || string(b) != "in-cwd\n" {
		t.Errorf("the cwd write: %q, %v", b, err)
	}
}
