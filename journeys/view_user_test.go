package journeys

// Issue 22, the findings that need a daemon which is not root (root ignores
// file modes): the daemon runs as fixtures.UnprivilegedUser (the system
// user sessiond-test when the tests run as root, as in CI). Each test
// asserts what must hold; on the hidden-path sandbox of b7f7734 each
// fails (see the commit message), with the allowlisted view of issue 22
// each must pass.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/fixtures"
)

// startUserDaemon runs a daemon as u with approvals manual on home (empty:
// a fresh directory of u) and the extra environment env.
func startUserDaemon(t *testing.T, u fixtures.User, m *fixtures.FakeModel, home string, env ...string) *fixtures.Daemon {
	t.Helper()
	return fixtures.StartDaemon(t, fixtures.DaemonOptions{User: &u, Home: home, Env: env,
		Config: fixtures.FakeModelConfig(m, "approvals: {mode: manual, timeout: 60}")})
}

// modelSaw reports whether s appears in any request the model received
// (every tool result of every turn is in the next request).
func modelSaw(m *fixtures.FakeModel, s string) bool {
	for _, r := range m.Requests() {
		if bytes.Contains(r.Raw, []byte(s)) {
			return true
		}
	}
	return false
}

// wantAsked submits text (the model answers with the terminal command
// command) and fails unless an approval prompt opens before the turn
// completes; the prompt is left unanswered.
func wantAsked(t *testing.T, c *fixtures.Client, m *fixtures.FakeModel, sid, text, command string) {
	t.Helper()
	m.On(text, fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{atkTerm(command)}}, fixtures.Reply{Text: "done"})
	r := submit(t, c, sid, fmt.Sprintf("in-%d", len(m.Requests())), text)
	e := c.WaitEvent(t, wait, func(e fixtures.Event) bool {
		return e.AdmissionID == r.AdmissionID && (e.Type == "prompt.opened" || e.Type == "turn.completed")
	})
	if e.Type != "prompt.opened" {
		t.Fatalf("%q ran without asking anyone (turn completed: %s); its result: %v", command, e.Payload, toolResults(m, text))
	}
}

// mode returns p's permission bits, or -1.
func mode(p string) os.FileMode {
	fi, err := os.Lstat(p)
	if err != nil {
		return ^os.FileMode(0)
	}
	return fi.Mode().Perm()
}

// selfApprovalCommand is the second step of finding 1, in the words a
// model would use from its cwd: give parent (relative to the cwd) its mode
// back, insert approval_allowlist rows for rm -rf into the home's
// state.db and print daemon.json.
func selfApprovalCommand(parent, home string) string {
	return fmt.Sprintf(`chmod 755 %s; cd %s && sqlite3 state.db "INSERT INTO approval_allowlist(pattern, created_at) VALUES ('rm-recursive', 'x'), ('sandboxed:rm-recursive', 'x')"; cat daemon.json`,
		parent, home)
}

// wantNoSelfApproval checks the end of finding 1's attack: no allowlist
// row for rm -rf in the daemon's state.db, the token never in a request
// to the model, and rm -rf of a victim in cwd (owned by u) still asks.
func wantNoSelfApproval(t *testing.T, d *fixtures.Daemon, c *fixtures.Client, m *fixtures.FakeModel, u fixtures.User, sid, cwd, result string) {
	t.Helper()
	if n := countRows(t, d, `pattern LIKE '%rm-recursive%'`); n != 0 {
		t.Errorf("a sandboxed command wrote %d approval_allowlist rows for rm -rf into the daemon's own state.db; its result: %s", n, result)
	}
	if modelSaw(m, d.Desc.Token) {
		t.Errorf("the daemon's token (daemon.json) reached the model in a tool result: %s", result)
	}
	victim, precious := makeVictim(t, cwd, "victim")
	for _, p := range []string{victim, precious} {
		if err := os.Chown(p, u.UID, u.GID); err != nil {
			t.Fatal(err)
		}
	}
	wantAsked(t, c, m, sid, "delete the victim", "rm -rf victim")
	wantIntact(t, precious)
}

// TestViewUserSelfApprovalChmodHomeParent (issue 22, finding 1): the
// session's cwd contains the daemon's home, one level down
// (cwd/state/.home, as make run's ./.home of a repository kept in a
// subdirectory). A safe command chmod 000s the home's parent; the next
// command's helper cannot stat the home and, on the hidden-path sandbox,
// skips hiding it: the command restores the mode, inserts
// approval_allowlist rows for rm -rf and reads daemon.json. No row may be
// written, the token may never reach the model, and rm -rf must still ask
// a person. (sbRun answers "once" to a prompt: the sandbox must hold for
// a command a person approved once, too.)
func TestViewUserSelfApprovalChmodHomeParent(t *testing.T) {
	u := fixtures.UnprivilegedUser(t)
	cwd := filepath.Join(u.Dir(t), "repo")
	parent := filepath.Join(cwd, "state")
	home := filepath.Join(parent, ".home")
	m := fixtures.NewFakeModel(t)
	d := startUserDaemon(t, u, m, home)
	t.Cleanup(func() { os.Chmod(parent, 0o700) }) // before the tree is removed
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{"cwd": cwd})
	resume(t, c, s.SessionID)

	r1, _ := sbRun(t, d, c, m, s.SessionID, "lock the home's parent", "chmod 000 state", false)
	t.Logf("turn 1 (chmod 000 state): mode now %o; result %s", mode(parent), r1)
	r2, _ := sbRun(t, d, c, m, s.SessionID, "approve yourself", selfApprovalCommand("state", "state/.home"), false)
	t.Logf("turn 2: mode now %o; result %s", mode(parent), r2)
	// The daemon's own home must be usable again for what follows,
	// whatever the sandbox did with turn 2 (a person would notice a locked
	// home; the finding is the allowlist, not this lock-out).
	if err := os.Chmod(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	wantNoSelfApproval(t, d, c, m, u, s.SessionID, cwd, r2)
}

// TestViewUserCwdChmod000Held (issue 22, finding 1 with the cwd itself as
// the home's parent, cwd/.home): a command that chmod 000s its own cwd
// leaves the next command unable to start at all (the helper cannot enter
// the cwd), so the home's parent cannot be locked while a command runs in
// it. This is a held line (it passes on the hidden-path sandbox too): the
// same attack finds no allowlist row written, no token, and rm -rf asks.
func TestViewUserCwdChmod000Held(t *testing.T) {
	u := fixtures.UnprivilegedUser(t)
	cwd := filepath.Join(u.Dir(t), "repo")
	home := filepath.Join(cwd, ".home")
	m := fixtures.NewFakeModel(t)
	d := startUserDaemon(t, u, m, home)
	t.Cleanup(func() { os.Chmod(cwd, 0o700) })
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{"cwd": cwd})
	resume(t, c, s.SessionID)
	r1, _ := sbRun(t, d, c, m, s.SessionID, "lock the cwd", "chmod 000 "+cwd, false)
	t.Logf("turn 1 (chmod 000 %s): mode now %o; result %s", cwd, mode(cwd), r1)
	r2, _ := sbRun(t, d, c, m, s.SessionID, "approve yourself", selfApprovalCommand(cwd, ".home"), false)
	t.Logf("turn 2: mode now %o; result %s", mode(cwd), r2)
	if err := os.Chmod(cwd, 0o700); err != nil {
		t.Fatal(err)
	}
	wantNoSelfApproval(t, d, c, m, u, s.SessionID, cwd, r2)
}

// TestViewUserRegistryUnusable (issue 22, finding 8): daemon B's home
// lies inside the cwd of daemon A's session (B's ./.home in a repository
// A works in), both daemons of the same unprivileged user, sharing
// $TMPDIR. B's home is protected from A's commands only through the
// registry of homes. The registry is switched off, either by another user
// (root here) creating every candidate directory first
// ($XDG_RUNTIME_DIR/sessiond, $TMPDIR/sessiond-UID; /run is not the user's
// to write), or by A's own safe command chmod 000ing the registry
// directory. A's next command appends `sandbox: {mode: off}` to B's
// config.yaml: it must not change, and a registry that is unusable makes
// sandboxed commands refuse to run (fail closed: a "sessiond sandbox:"
// error, nothing ran), not a warning.
func TestViewUserRegistryUnusable(t *testing.T) {
	for _, how := range []string{"created by another user first", "chmod 000 by a command"} {
		t.Run(how, func(t *testing.T) {
			u := fixtures.UnprivilegedUser(t)
			tmp := u.Dir(t) // $TMPDIR of both daemons
			env := []string{"TMPDIR=" + tmp}
			reg := filepath.Join(tmp, fmt.Sprintf("sessiond-%d", u.UID))
			if how == "created by another user first" {
				xdg := u.Dir(t)
				env = append(env, "XDG_RUNTIME_DIR="+xdg)
				for _, dir := range []string{reg, filepath.Join(xdg, "sessiond")} {
					if err := os.Mkdir(dir, 0o755); err != nil { // the test's user's (root in CI), not u's
						t.Fatal(err)
					}
				}
				if u.UID == os.Geteuid() {
					t.Fatalf("the tests run as uid %d: another user cannot be played (run as root, as CI does)", u.UID)
				}
			}
			t.Cleanup(func() { os.Chmod(reg, 0o700) })
			root := filepath.Join(u.Dir(t), "work")
			homeB := filepath.Join(root, "repo-b", ".home")
			mB := fixtures.NewFakeModel(t)
			startUserDaemon(t, u, mB, homeB, env...) // B registers its home (when it can)
			mA := fixtures.NewFakeModel(t)
			dA := startUserDaemon(t, u, mA, "", env...)
			cA := dA.Dial(t)
			sA := createSession(t, cA, map[string]any{"cwd": root})
			resume(t, cA, sA.SessionID)
			configB := filepath.Join(homeB, "config.yaml")
			before, err := os.ReadFile(configB)
			if err != nil {
				t.Fatal(err)
			}

			if how == "chmod 000 by a command" {
				if _, err := os.Stat(filepath.Join(reg, "homes")); err != nil {
					t.Fatalf("the registry is not where the test expects it (%v): fix the test", err)
				}
				r1, _ := sbRun(t, dA, cA, mA, sA.SessionID, "switch the registry off",
					fmt.Sprintf("chmod 000 %s/homes; chmod 000 %s", reg, reg), false)
				t.Logf("turn 1: %s now mode %o; result %s", reg, mode(reg), r1)
			}
			ran := filepath.Join(root, "ran.txt")
			r2, _ := sbRun(t, dA, cA, mA, sA.SessionID, "rewrite b's config",
				fmt.Sprintf("touch %s; echo 'sandbox: {mode: off}' >> %s", ran, configB), false)
			t.Logf("turn 2 (rewrite B's config.yaml): result %s", r2)
			after, _ := os.ReadFile(configB)
			if !bytes.Equal(before, after) {
				t.Errorf("a command of daemon A rewrote daemon B's config.yaml to:\n%s\nits result: %s", after, r2)
			}
			registryOff := how == "created by another user first" || mode(reg)&0o700 != 0o700
			if registryOff {
				if _, err := os.Stat(ran); err == nil || !strings.Contains(r2, "sessiond sandbox") {
					t.Errorf("with the registry unusable (%s, mode %o) a sandboxed command ran (ran.txt: %v) instead of failing closed with a \"sessiond sandbox:\" error; its result: %s",
						reg, mode(reg), err == nil, r2)
				}
			}
			if n := strings.Count(dA.Stderr(), "could not be registered"); n > 0 {
				t.Logf("daemon A warned %d times that its home could not be registered", n)
			}
		})
	}
}

// TestViewUserOrdinaryWork (issue 22): with the daemon as an unprivileged
// user, everyday commands still run in the default sandbox: ls, a write
// in the cwd, git init and git status.
func TestViewUserOrdinaryWork(t *testing.T) {
	u := fixtures.UnprivilegedUser(t)
	cwd := filepath.Join(u.Dir(t), "repo")
	u.MkdirAs(t, cwd)
	if err := os.WriteFile(filepath.Join(cwd, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chown(filepath.Join(cwd, "README"), u.UID, u.GID)
	m := fixtures.NewFakeModel(t)
	d := startUserDaemon(t, u, m, "")
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{"cwd": cwd})
	resume(t, c, s.SessionID)
	for _, w := range []struct{ command, want string }{
		{"ls -la", "README"},
		{"echo from-the-model > note.txt && cat note.txt", "from-the-model"},
		{"git init -q && git add -A && git status --short", "A  README"},
		{"id -u", fmt.Sprint(u.UID)},
	} {
		result, _ := sbRun(t, d, c, m, s.SessionID, "work: "+w.command, w.command, false)
		if !strings.Contains(result, `"exit_code":0`) || !strings.Contains(result, w.want) || !strings.Contains(result, `"sandbox":"workspace-write, network off"`) {
			t.Errorf("%s: want exit 0, %q in the output, sandboxed; got %s", w.command, w.want, result)
		}
	}
	fi, err := os.Stat(filepath.Join(cwd, "note.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != u.UID {
		t.Errorf("note.txt is owned by uid %d, not the daemon's user %d", st.Uid, u.UID)
	}
}
