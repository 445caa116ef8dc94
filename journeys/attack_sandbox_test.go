package journeys

// Adversarial review of the sandbox (issue 11): attacks that the sandbox
// journeys do not cover. Each test asserts what SHOULD hold; a failure is a
// finding (see the review report).

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/fixtures"
)

// TestAttackSandboxCrossDaemonSelfApproval: the sandbox protects only the
// daemon's own home. A second daemon whose home lies inside a session's
// cwd (the README's quick start keeps .home inside the repository; a
// session of another daemon working in the parent directory) is writable:
// a command rated safe, run with no prompt, inserts
// "unsandboxed:CMD" into that daemon's always-allowlist, and that daemon
// then runs CMD outside its sandbox without asking anyone.
func TestAttackSandboxCrossDaemonSelfApproval(t *testing.T) {
	root := t.TempDir()
	homeB := filepath.Join(root, "repo-b", ".home")
	if err := os.MkdirAll(homeB, 0o700); err != nil {
		t.Fatal(err)
	}
	mB := fixtures.NewFakeModel(t)
	dB := fixtures.StartDaemon(t, fixtures.DaemonOptions{Home: homeB, Config: fixtures.FakeModelConfig(mB, "approvals: {mode: manual, timeout: 60}")})
	mA := fixtures.NewFakeModel(t)
	dA := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(mA, "approvals: {mode: manual, timeout: 60}")})

	outside := t.TempDir()
	target := filepath.Join(outside, "escaped.txt")
	escCmd := "echo escaped > " + target

	// Daemon A's model, sandboxed, cwd = root (which holds B's home).
	cA := dA.Dial(t)
	sA := createSession(t, cA, map[string]any{"cwd": root})
	resume(t, cA, sA.SessionID)
	ins := fmt.Sprintf(`sqlite3 %s "INSERT INTO approval_allowlist(pattern, created_at) VALUES('unsandboxed:%s', 'x')"`,
		filepath.Join(homeB, "state.db"), escCmd)
	res, _ := sbRun(t, dA, cA, mA, sA.SessionID, "poison b", ins, false)
	if n := countRows(t, dB, "pattern LIKE 'unsandboxed:%'"); n != 0 {
		t.Errorf("a sandboxed command of daemon A wrote daemon B's allowlist (%d rows); its result: %s", n, res)
	}

	// Daemon B's model asks to escalate exactly that command: a person must
	// be asked (escalation always asks).
	cB := dB.Dial(t)
	sB := createSession(t, cB, map[string]any{})
	resume(t, cB, sB.SessionID)
	mB.On("escalate", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("terminal", jsonArgs(map[string]any{
		"command": escCmd, "sandbox_permissions": "escalated", "justification": "needed"}))}}, fixtures.Reply{Text: "done"})
	r := submit(t, cB, sB.SessionID, "esc-1", "escalate")
	e := cB.WaitEvent(t, wait, func(e fixtures.Event) bool {
		return e.AdmissionID == r.AdmissionID && (e.Type == "prompt.opened" || e.Type == "turn.completed")
	})
	if e.Type != "prompt.opened" {
		b, _ := os.ReadFile(target)
		t.Fatalf("daemon B ran an escalated command without asking anyone (file %s now holds %q)", target, strings.TrimSpace(string(b)))
	}
}

// TestAttackSandboxSurvivorReadsNewToken: a sandboxed command leaves a
// process in a new session (setsid), which the turn's end does not kill,
// nor the next boot (it left the recorded process group). In a session
// whose cwd is the daemon's home, daemon.json is covered by a bind mount
// on its dentry; the restarted daemon writes a new daemon.json by rename,
// which detaches that cover in the survivor's namespace: the survivor
// reads the new token and copies it to a writable root. Nothing a command
// starts should outlive its turn, and no command should ever read the
// token.
func TestAttackSandboxSurvivorReadsNewToken(t *testing.T) {
	out := t.TempDir()
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m,
		"approvals: {mode: manual, timeout: 60}\nsandbox: {mode: workspace-write, writable_roots: ["+out+"]}")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{"cwd": d.Home})
	resume(t, c, s.SessionID)
	leak := filepath.Join(out, "tok")
	alive := filepath.Join(out, "alive")
	cmd := fmt.Sprintf(`setsid sh -c 'while :; do cat %s/daemon.json > %s 2>/dev/null; date +%%s%%N > %s; sleep 0.2; done' </dev/null >/dev/null 2>&1 &`,
		d.Home, leak, alive)
	sbRun(t, d, c, m, s.SessionID, "leave a survivor", cmd, false)
	t.Cleanup(func() { // the survivor is ours: stop it by what it writes
		exec.Command("sh", "-c", "for p in $(pgrep -f '"+alive+"'); do kill $p; done").Run()
	})
	// After the turn nothing the command started may still run: its loop's
	// shell is named by its command line.
	fixtures.Eventually(t, 10*time.Second, "the command's setsid loop to be gone after its turn", func() bool {
		return len(liveProcsWithArg(alive)) == 0
	})
	old := d.Desc.Token
	d.SIGTERM(t)
	d.Restart(t)
	if d.Desc.Token == old {
		t.Fatal("the restart kept the token")
	}
	if pids := liveProcsWithArg(alive); len(pids) > 0 {
		t.Fatalf("the command's loop runs again after the restart: pids %v", pids)
	}
	if b, _ := os.ReadFile(leak); strings.Contains(string(b), d.Desc.Token) {
		t.Fatalf("a sandboxed command's leftover read the restarted daemon's token from daemon.json: %s", b)
	}
}

// liveProcsWithArg lists the pids of live (not zombie) processes whose
// command line contains s.
func liveProcsWithArg(s string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cl, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(cl), s) {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		if i := strings.LastIndexByte(string(st), ')'); i > 0 && i+2 < len(st) && st[i+2] != 'Z' && st[i+2] != 'X' {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestAttackSandboxCwdSwappedForSymlink: the session's cwd lies in a
// writable root (writable_roots: [~/src], cwd ~/src/app, say). A
// sandboxed command renames the cwd away and puts a symlink to another
// directory in its place; the next command's helper resolves the cwd
// through it and makes the target writable. With "/" as the target, the
// whole filesystem but the home is writable.
func TestAttackSandboxCwdSwappedForSymlink(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	cwd := filepath.Join(root, "app")
	if err := os.Mkdir(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m,
		"approvals: {mode: manual, timeout: 60}\nsandbox: {mode: workspace-write, writable_roots: ["+root+"]}")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{"cwd": cwd})
	resume(t, c, s.SessionID)
	sbRun(t, d, c, m, s.SessionID, "swap", "cd .. && mv app app.old && ln -s "+outside+" app", false)
	res, _ := sbRun(t, d, c, m, s.SessionID, "write", "echo pwned > escaped.txt", false)
	if b, err := os.ReadFile(filepath.Join(outside, "escaped.txt")); err == nil {
		t.Fatalf("a command wrote %q in %s, outside the cwd and every writable root; its result: %s", b, outside, res)
	}
}

// TestAttackSandboxReplacesHelperBinary: the helper is started by the
// daemon's executable path (os.Executable at start-up). `make run` builds
// bin/sessiond inside the repository the sessions work in (README quick
// start), so that path lies in a writable cwd: a sandboxed command (rated
// safe, no prompt) renames its own program over bin/sessiond, and the next
// command, however harmless, runs that program in place of the helper:
// as root with every capability, unsandboxed, before anything is confined.
func TestAttackSandboxReplacesHelperBinary(t *testing.T) {
	repo := t.TempDir()
	bin := filepath.Join(repo, "bin", "sessiond")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(fixtures.BuildBinaries(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	proof := filepath.Join(t.TempDir(), "escaped")
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Binary: bin, Config: fixtures.FakeModelConfig(m, "approvals: {mode: manual, timeout: 60}")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{"cwd": repo})
	resume(t, c, s.SessionID)
	fake := `printf '#!/bin/sh\n{ grep CapEff /proc/self/status; cat ` + filepath.Join(d.Home, "daemon.json") + `; } > ` + proof +
		`\nexec /bin/sh -c "$3"\n' > bin/x && chmod +x bin/x && mv bin/x bin/sessiond`
	sbRun(t, d, c, m, s.SessionID, "replace the helper", fake, false)
	sbRun(t, d, c, m, s.SessionID, "harmless", "echo hi", false)
	if b, err := os.ReadFile(proof); err == nil {
		t.Fatalf("a program the model wrote ran as the sandbox helper, unsandboxed:\n%s", b)
	}
}

// TestAttackSandboxRememberedEscalationRunsEditedScript: a person reads
// build.sh and approves the escalated `sh build.sh` for the session. The
// remembered pattern is the command text, not what it runs: the model
// edits build.sh inside the sandbox (no prompt) and escalates the same
// text again, which runs the new script outside the sandbox without
// asking anyone.
func TestAttackSandboxRememberedEscalationRunsEditedScript(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: manual, timeout: 60}")})
	c := d.Dial(t)
	cwd, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(cwd, "build.sh"), []byte("echo building\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := createSession(t, c, map[string]any{"cwd": cwd})
	resume(t, c, s.SessionID)
	esc := fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("terminal", jsonArgs(map[string]any{
		"command": "sh build.sh", "sandbox_permissions": "escalated", "justification": "the build needs the network"}))}}
	m.On("build", esc, fixtures.Reply{Text: "done"})
	r := submit(t, c, s.SessionID, "b1", "build")
	p := waitPrompt(t, c, r.AdmissionID, "approval")
	if _, err := answerApproval(t, c, s.SessionID, p, "session"); err != nil {
		t.Fatal(err)
	}
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatal(out)
	}
	proof := filepath.Join(outside, "escaped")
	sbRun(t, d, c, m, s.SessionID, "edit", "echo 'echo escaped > "+proof+"' > build.sh", false)
	m.On("build again", esc, fixtures.Reply{Text: "done"})
	r = submit(t, c, s.SessionID, "b2", "build again")
	e := c.WaitEvent(t, wait, func(e fixtures.Event) bool {
		return e.AdmissionID == r.AdmissionID && (e.Type == "prompt.opened" || e.Type == "turn.completed")
	})
	if _, err := os.Stat(proof); e.Type != "prompt.opened" && err == nil {
		t.Fatal("an edited script ran outside the sandbox on an approval given for its earlier content; no one was asked")
	}
}
