package journeys

// The sandbox (issue 11): with the default config and approvals manual, a
// model's command cannot approve itself (state.db, config.yaml,
// daemon.json), read the daemon's secrets, signal the daemon, reach the
// network or write outside its cwd — also when a person approves it once,
// and also when the session's cwd is the daemon's home. The same table
// with sandbox mode off shows every attack taking effect, so each check
// can fail.

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sessiond/sessiond/fixtures"
)

const sandboxSecret = "sk-sandbox-journey-0123456789"

// sbAttack is one command the fake model issues, and how to tell that it
// took effect.
type sbAttack struct {
	name    string
	command func(home string) string
	// effect reports whether the attack took effect (checked right after
	// the turn).
	effect func(t *testing.T, d *fixtures.Daemon, result string) bool
	// kills says the attack, when it works, kills the daemon.
	kills bool
}

func countRows(t *testing.T, d *fixtures.Daemon, where string) int {
	t.Helper()
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	var n int
	if err := db.Get(&n, `SELECT COUNT(*) FROM approval_allowlist WHERE `+where); err != nil {
		t.Fatal(err)
	}
	return n
}

func sbAttacks(listener string, accepted *atomic.Int64, userHome string) []sbAttack {
	return []sbAttack{
		{name: "sqlite3 writes state.db", command: func(h string) string {
			return `sqlite3 "` + h + `/state.db" "INSERT INTO approval_allowlist(pattern,created_at) VALUES('rm-recursive','x')"`
		}, effect: func(t *testing.T, d *fixtures.Daemon, _ string) bool {
			return countRows(t, d, `pattern = 'rm-recursive'`) > 0
		}},
		{name: "python3 writes state.db", command: func(h string) string {
			return `python3 -c "import sqlite3; c=sqlite3.connect('` + h + `/state.db'); c.execute(\"INSERT INTO approval_allowlist(pattern,created_at) VALUES('py-rule','x')\"); c.commit()"`
		}, effect: func(t *testing.T, d *fixtures.Daemon, _ string) bool {
			return countRows(t, d, `pattern = 'py-rule'`) > 0
		}},
		{name: "append to config.yaml", command: func(h string) string {
			return `echo '# approvals: {mode: off}' >> "` + h + `/config.yaml"`
		}, effect: func(t *testing.T, d *fixtures.Daemon, _ string) bool {
			b, _ := os.ReadFile(filepath.Join(d.Home, "config.yaml"))
			return strings.Contains(string(b), "# approvals: {mode: off}")
		}},
		{name: "read the daemon's environment", command: func(string) string {
			return `tr '\0' '\n' < /proc/$PPID/environ | grep SANDBOX_JOURNEY`
		}, effect: func(t *testing.T, d *fixtures.Daemon, result string) bool {
			return strings.Contains(result, sandboxSecret)
		}},
		{name: "WebSocket with the token of daemon.json", command: func(h string) string {
			return `python3 -c "
import json, socket
d = json.load(open('` + h + `/daemon.json'))
host, port = d['url'][len('ws://'):].split('/')[0].rsplit(':', 1)
s = socket.create_connection((host, int(port)), timeout=10)
s.sendall(('GET /rpc HTTP/1.1\r\nHost: %s:%s\r\nAuthorization: Bearer %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n' % (host, port, d['token'])).encode())
print(s.recv(200).decode().splitlines()[0])
"`
		}, effect: func(t *testing.T, d *fixtures.Daemon, result string) bool {
			return strings.Contains(result, "101 Switching Protocols")
		}},
		{name: "TCP to a listener on 127.0.0.1", command: func(string) string {
			return `python3 -c "import socket; socket.create_connection(('127.0.0.1', ` + listener + `), timeout=10).sendall(b'hi')"`
		}, effect: func(*testing.T, *fixtures.Daemon, string) bool { return accepted.Load() > 0 }},
		{name: "write in $HOME outside the cwd", command: func(string) string { return `echo x > "$HOME/pwned-by-model"` },
			effect: func(*testing.T, *fixtures.Daemon, string) bool {
				_, err := os.Stat(filepath.Join(userHome, "pwned-by-model"))
				return err == nil
			}},
		{name: "delete daemon.json", command: func(h string) string { return `rm "` + h + `/daemon.json"` },
			effect: func(t *testing.T, d *fixtures.Daemon, _ string) bool {
				_, err := os.Stat(filepath.Join(d.Home, "daemon.json"))
				return os.IsNotExist(err)
			}},
		{name: "kill the pid in daemon.json", command: func(h string) string {
			return `kill -9 $(sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' "` + h + `/daemon.json")`
		}, kills: true},
		{name: "kill -9 $PPID", command: func(string) string { return `kill -9 $PPID` }, kills: true},
	}
}

// sbRun has the fake model issue command in session sid, answers "once"
// to every approval prompt, waits for the turn and returns the stored
// tool result. With dies, it instead waits for the daemon to exit (the
// attack killed it) and returns false.
func sbRun(t *testing.T, d *fixtures.Daemon, c *fixtures.Client, m *fixtures.FakeModel, sid, text, command string, dies bool) (string, bool) {
	t.Helper()
	m.On(text, fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{atkTerm(command)}}, fixtures.Reply{Text: "done"})
	r := submit(t, c, sid, fmt.Sprintf("in-%d", len(m.Requests())), text)
	answered := map[string]bool{}
	approve := func() bool {
		for _, e := range c.Events() {
			if e.AdmissionID == r.AdmissionID && e.Type == "turn.completed" {
				return true
			}
			if e.AdmissionID != r.AdmissionID || e.Type != "prompt.opened" {
				continue
			}
			var p struct {
				Prompt prompt `json:"prompt"`
			}
			json.Unmarshal(e.Payload, &p)
			if !answered[p.Prompt.PromptID] {
				answered[p.Prompt.PromptID] = true
				if _, err := answerApproval(t, c, sid, p.Prompt, "once"); err != nil && !dies {
					t.Fatalf("%s: approve once: %v", text, err)
				}
			}
		}
		return false
	}
	if dies {
		fixtures.Eventually(t, wait, text+": the daemon dies", func() bool { approve(); return !d.Running() })
		return "", false
	}
	fixtures.Eventually(t, wait, text+": the turn completes", approve)
	res := toolResults(m, text) // the whole transcript's: this turn's is the last
	if len(res) == 0 {
		t.Fatalf("%s: no tool result", text)
	}
	return res[len(res)-1], true
}

func TestSandboxAttacks(t *testing.T) {
	for _, mode := range []string{"default", "off"} {
		for _, where := range []string{"beside", "home"} {
			t.Run(mode+"/cwd "+where, func(t *testing.T) { sandboxAttacks(t, mode, where) })
		}
	}
}

func sandboxAttacks(t *testing.T, mode, where string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int64
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			conn.Close()
		}
	}()
	m := fixtures.NewFakeModel(t)
	cfg := "approvals: {mode: manual, timeout: 60}"
	if mode == "off" {
		cfg += "\nsandbox: {mode: off}"
	}
	userHome := t.TempDir()
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, cfg),
		Env: []string{"SANDBOX_JOURNEY_SECRET=" + sandboxSecret, "HOME=" + userHome}})
	c := d.Dial(t)
	var info struct {
		Sandbox struct {
			Mode      string `json:"mode"`
			Network   bool   `json:"network"`
			Available bool   `json:"available"`
			Reason    string `json:"reason"`
		} `json:"sandbox"`
	}
	if err := c.Call(ctxT(t), "daemon.info", nil, &info); err != nil {
		t.Fatal(err)
	}
	if mode == "default" && (info.Sandbox.Mode != "workspace-write" || info.Sandbox.Network || !info.Sandbox.Available) {
		t.Fatalf("daemon.info sandbox = %+v, want workspace-write, network off, available (CI kernels have Landlock ABI >= 6)", info.Sandbox)
	}
	cwd := t.TempDir()
	if where == "home" {
		cwd = d.Home
	}
	s := createSession(t, c, map[string]any{"cwd": cwd})
	resume(t, c, s.SessionID)
	port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	for i, a := range sbAttacks(port, &accepted, userHome) {
		if a.kills && mode == "off" && i != len(sbAttacks(port, &accepted, userHome))-1 {
			continue // one kill is enough to show it works without the sandbox
		}
		text := "attack: " + a.name
		result, served := sbRun(t, d, c, m, s.SessionID, text, a.command(d.Home), mode == "off" && a.kills)
		if mode == "off" {
			if a.kills {
				code, _ := d.Wait(wait)
				t.Logf("%s: without the sandbox the daemon died (exit %d)", a.name, code)
				return
			}
			if !served {
				t.Fatalf("%s: the daemon went away", a.name)
			}
			if !a.effect(t, d, result) {
				t.Errorf("%s took no effect without the sandbox (the check cannot fail): %s", a.name, result)
			}
			continue
		}
		if !served {
			t.Fatalf("%s: the daemon went away: the sandbox did not hold", a.name)
		}
		if a.effect != nil && a.effect(t, d, result) {
			t.Errorf("%s took effect through the sandbox: %s", a.name, result)
		}
		if !strings.Contains(result, `"sandbox_blocked":true`) || !strings.Contains(result, "escalated") {
			t.Errorf("%s: the stored result does not say the sandbox blocked it: %s", a.name, result)
		}
	}
	if mode == "off" {
		return
	}
	// The daemon keeps serving, and the secret is nowhere in the store.
	atkAlive(t, c)
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	var leaks int
	if err := db.Get(&leaks, `SELECT (SELECT COUNT(*) FROM messages WHERE content LIKE ?) + (SELECT COUNT(*) FROM events WHERE payload LIKE ?)`,
		"%"+sandboxSecret+"%", "%"+sandboxSecret+"%"); err != nil {
		t.Fatal(err)
	}
	if leaks != 0 {
		t.Fatalf("the daemon's secret is in %d stored messages or events", leaks)
	}
	for _, f := range []string{"config.yaml", "daemon.json"} {
		if _, err := os.Stat(filepath.Join(d.Home, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestSandboxOrdinaryWork: everyday commands run inside the default
// sandbox: git, python3 writing in the cwd, make, reading system files.
func TestSandboxOrdinaryWork(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: manual, timeout: 60}")})
	c := d.Dial(t)
	cwd := t.TempDir()
	if err := os.WriteFile(filepath.Join(cwd, "Makefile"), []byte("all:\n\techo built > built.txt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := createSession(t, c, map[string]any{"cwd": cwd})
	resume(t, c, s.SessionID)
	for _, w := range []struct{ command, file string }{
		{"git init -q && echo hi > a.txt && git add -A && git -c user.name=t -c user.email=t@example.com commit -q -m first && git log --oneline | wc -l > commits.txt", "commits.txt"},
		{`python3 -c "open('py.txt', 'w').write('from python')"`, "py.txt"},
		{"make", "built.txt"},
		{"cat /etc/os-release > os.txt", "os.txt"},
		{`mktemp > tmp.txt && echo "$TMPDIR" >> tmp.txt`, "tmp.txt"},
	} {
		result, _ := sbRun(t, d, c, m, s.SessionID, "work: "+w.command, w.command, false)
		if !strings.Contains(result, `"exit_code":0`) || !strings.Contains(result, `"sandbox":"workspace-write, network off"`) {
			t.Errorf("%s: %s", w.command, result)
		}
		if _, err := os.Stat(filepath.Join(cwd, w.file)); err != nil {
			t.Errorf("%s: %v", w.command, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(cwd, "commits.txt")); strings.TrimSpace(string(b)) != "1" {
		t.Errorf("git log: %q", b)
	}
}

// TestSandboxEscalation: a command asking to run unsandboxed always opens
// an approval prompt (approvals off included) that says so and why; it
// runs outside the sandbox only after the answer, and the prompt of a
// daemon that crashed is refused stale_generation after the restart.
func TestSandboxEscalation(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	hold := fixtures.NewGate()
	m.On("hold", fixtures.Reply{Text: "held", Gate: hold})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: off, timeout: 60}")})
	c := d.Dial(t)
	outside := t.TempDir()
	target := filepath.Join(outside, "escalated.txt")
	esc := func(file string) fixtures.FakeToolCall {
		return tc("terminal", jsonArgs(map[string]any{"command": `echo ran > "` + file + `"`, "sandbox_permissions": "escalated",
			"justification": "write the release notes outside the workspace"}))
	}
	m.On("escalate", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{esc(target)}}, fixtures.Reply{Text: "done"})
	m.On("sandboxed", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{atkTerm(`echo ran > "` + target + `"`)}}, fixtures.Reply{Text: "done"})
	s := createSession(t, c, map[string]any{})
	resume(t, c, s.SessionID)

	// Without escalation the write is blocked, with approvals off no prompt.
	r := submit(t, c, s.SessionID, "sb-1", "sandboxed")
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatal(out)
	}
	if res := toolResults(m, "sandboxed"); len(res) != 1 || !strings.Contains(res[0], `"sandbox_blocked":true`) {
		t.Fatalf("sandboxed write outside: %v", res)
	}
	if _, err := os.Stat(target); err == nil {
		t.Fatal("the sandboxed command wrote outside its cwd")
	}

	// Escalated: a prompt opens although approvals are off.
	r = submit(t, c, s.SessionID, "esc-1", "escalate")
	p := waitPrompt(t, c, r.AdmissionID, "approval")
	pl := promptPayload(t, c, p)
	sb, _ := pl["sandbox"].(map[string]any)
	if pl["sandbox_permissions"] != "escalated" || pl["justification"] != "write the release notes outside the workspace" ||
		sb["unsandboxed"] != true || sb["mode"] != "workspace-write" || !strings.Contains(fmt.Sprint(pl["reason"]), "OUTSIDE the sandbox") {
		t.Fatalf("escalation prompt payload: %v", pl)
	}
	if _, err := os.Stat(target); err == nil {
		t.Fatal("the escalated command ran before the approval")
	}
	if _, err := answerApproval(t, c, s.SessionID, p, "once"); err != nil {
		t.Fatal(err)
	}
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatal(out)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "ran\n" {
		t.Fatalf("the approved escalated command did not run unsandboxed: %q %v", b, err)
	}

	// A prompt of a crashed daemon: refused after the restart, nothing runs.
	target2 := filepath.Join(outside, "after-restart.txt")
	m.On("escalate again", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{esc(target2)}}, fixtures.Reply{Text: "done"})
	r = submit(t, c, s.SessionID, "esc-2", "escalate again")
	p = waitPrompt(t, c, r.AdmissionID, "approval")
	d.SIGKILL(t)
	d.Restart(t)
	c2 := d.Dial(t)
	_, err := answerApproval(t, c2, s.SessionID, p, "once")
	wantReason(t, err, -32000, "stale_generation")
	if _, err := os.Stat(target2); err == nil {
		t.Fatal("an escalated command ran on a stale approval")
	}
	hold.Release()
}

// TestSandboxSessionPolicy: session.create narrows the configured sandbox
// (read-only here: the cwd is no longer writable), the snapshot and the
// approval prompt say which sandbox applies, and widening is refused
// invalid_params naming the field. The policy is frozen: a restart with
// another config keeps the session's.
func TestSandboxSessionPolicy(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: strict, timeout: 60}")})
	c := d.Dial(t)
	for field, sb := range map[string]map[string]any{
		"sandbox.mode":              {"mode": "off"},
		"sandbox.network":           {"network": true},
		"sandbox.writable_roots[0]": {"writable_roots": []string{"/srv"}},
	} {
		err := c.Call(ctxT(t), "session.create", map[string]any{"cwd": t.TempDir(), "sandbox": sb}, nil)
		if fixtures.ErrorReason(err) != "invalid_params" || !strings.Contains(err.Error(), field) {
			t.Errorf("widening %v: %v, want invalid_params naming %s", sb, err, field)
		}
	}
	cwd := t.TempDir()
	var snap struct {
		SessionID string         `json:"session_id"`
		Sandbox   map[string]any `json:"sandbox"`
	}
	if err := c.Call(ctxT(t), "session.create", map[string]any{"cwd": cwd, "sandbox": map[string]any{"mode": "read-only"}}, &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Sandbox["mode"] != "read-only" || snap.Sandbox["network"] != false || snap.Sandbox["available"] != true {
		t.Fatalf("snapshot sandbox = %v", snap.Sandbox)
	}
	resume(t, c, snap.SessionID)
	m.On("write here", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{atkTerm("echo x > f")}}, fixtures.Reply{Text: "done"})
	r := submit(t, c, snap.SessionID, "w1", "write here")
	p := waitPrompt(t, c, r.AdmissionID, "approval")
	if sb, _ := promptPayload(t, c, p)["sandbox"].(map[string]any); sb["mode"] != "read-only" || sb["unsandboxed"] != false {
		t.Fatalf("prompt sandbox = %v", sb)
	}
	if _, err := answerApproval(t, c, snap.SessionID, p, "once"); err != nil {
		t.Fatal(err)
	}
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatal(out)
	}
	if res := toolResults(m, "write here"); len(res) == 0 || !strings.Contains(res[len(res)-1], `"sandbox_blocked":true`) {
		t.Fatalf("read-only session wrote: %v", res)
	}
	if _, err := os.Stat(filepath.Join(cwd, "f")); err == nil {
		t.Fatal("a read-only session wrote in its cwd")
	}
	// Frozen: the config now says off, the session stays read-only.
	d.SIGTERM(t)
	d.WriteConfig(t, fixtures.FakeModelConfig(m, "approvals: {mode: strict, timeout: 60}\nsandbox: {mode: off}"))
	d.Restart(t)
	var again struct {
		Sandbox map[string]any `json:"sandbox"`
	}
	if err := d.Dial(t).Call(ctxT(t), "session.resume", map[string]any{"session_id": snap.SessionID}, &again); err != nil {
		t.Fatal(err)
	}
	if again.Sandbox["mode"] != "read-only" {
		t.Fatalf("after a restart with mode off: %v", again.Sandbox)
	}
}

// TestSandboxUnavailableFailsClosed: when the sandbox cannot be set up
// (here the probe cannot make its temp directory), the daemon starts,
// warns once, daemon.info says available false with the reason, and every
// command — a harmless one too — needs approval; with sandbox mode off
// said explicitly, commands are gated as before.
func TestSandboxUnavailableFailsClosed(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("mode off %v", off), func(t *testing.T) {
			m := fixtures.NewFakeModel(t)
			cfg := "approvals: {mode: manual, timeout: 60}"
			if off {
				cfg += "\nsandbox: {mode: off}"
			}
			d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, cfg),
				Env: []string{"TMPDIR=" + filepath.Join(t.TempDir(), "missing")}})
			c := d.Dial(t)
			var info struct {
				Sandbox map[string]any `json:"sandbox"`
			}
			if err := c.Call(ctxT(t), "daemon.info", nil, &info); err != nil {
				t.Fatal(err)
			}
			warns := strings.Count(d.Stderr(), "the sandbox is not available")
			if off {
				if info.Sandbox["available"] != false || info.Sandbox["mode"] != "off" || warns != 0 {
					t.Fatalf("mode off: info %v, %d warnings", info.Sandbox, warns)
				}
			} else if info.Sandbox["available"] != false || !strings.Contains(fmt.Sprint(info.Sandbox["reason"]), "temp directory") || warns != 1 {
				t.Fatalf("daemon.info sandbox = %v, %d warnings; stderr:\n%s", info.Sandbox, warns, d.Stderr())
			}
			cwd := t.TempDir()
			s := createSession(t, c, map[string]any{"cwd": cwd})
			resume(t, c, s.SessionID)
			m.On("harmless", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{atkTerm("echo hi > hello.txt")}}, fixtures.Reply{Text: "done"})
			r := submit(t, c, s.SessionID, "h1", "harmless")
			e := c.WaitEvent(t, wait, func(e fixtures.Event) bool {
				return e.AdmissionID == r.AdmissionID && (e.Type == "prompt.opened" || e.Type == "turn.completed")
			})
			if off {
				if e.Type != "turn.completed" {
					t.Fatal("with mode off a harmless command asked for approval")
				}
				return
			}
			if e.Type != "prompt.opened" {
				t.Fatal("a command ran without approval although the sandbox is not available")
			}
			if _, err := os.Stat(filepath.Join(cwd, "hello.txt")); err == nil {
				t.Fatal("ran before the approval")
			}
			var p struct {
				Prompt prompt `json:"prompt"`
			}
			json.Unmarshal(e.Payload, &p)
			if sb, _ := promptPayload(t, c, p.Prompt)["sandbox"].(map[string]any); sb["unsandboxed"] != true || sb["unavailable"] == nil {
				t.Fatalf("prompt sandbox = %v", sb)
			}
			if _, err := answerApproval(t, c, s.SessionID, p.Prompt, "once"); err != nil {
				t.Fatal(err)
			}
			if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
				t.Fatal(out)
			}
			if _, err := os.Stat(filepath.Join(cwd, "hello.txt")); err != nil {
				t.Fatal("the approved command did not run")
			}
		})
	}
}

// TestSandboxedAlwaysApprovalDoesNotRunUnsandboxed: "always" given to a
// dangerous command that ran in the sandbox is remembered as
// sandboxed:<pattern>; after a restart with sandbox mode off, the same kind
// of command in a new (unsandboxed) session asks again instead of running
// outside any sandbox on the earlier approval.
func TestSandboxedAlwaysApprovalDoesNotRunUnsandboxed(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: manual, timeout: 60}")})
	c := d.Dial(t)
	cwd := t.TempDir()
	for _, v := range []string{"v1", "v2"} {
		os.MkdirAll(filepath.Join(cwd, v, "sub"), 0o755)
	}
	s := createSession(t, c, map[string]any{"cwd": cwd})
	resume(t, c, s.SessionID)
	m.On("delete v1", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{atkTerm("rm -rf v1")}}, fixtures.Reply{Text: "done"})
	r := submit(t, c, s.SessionID, "d1", "delete v1")
	p := waitPrompt(t, c, r.AdmissionID, "approval")
	if pat := promptPayload(t, c, p)["pattern"]; pat != "sandboxed:rm-recursive" {
		t.Fatalf("a confined run offers pattern %v, want sandboxed:rm-recursive", pat)
	}
	if _, err := answerApproval(t, c, s.SessionID, p, "always"); err != nil {
		t.Fatal(err)
	}
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatal(out)
	}
	d.SIGTERM(t)
	d.WriteConfig(t, fixtures.FakeModelConfig(m, "approvals: {mode: manual, timeout: 60}\nsandbox: {mode: off}"))
	d.Restart(t)
	c = d.Dial(t)
	s = createSession(t, c, map[string]any{"cwd": cwd})
	resume(t, c, s.SessionID)
	m.On("delete v2", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{atkTerm("rm -rf v2")}}, fixtures.Reply{Text: "done"})
	r = submit(t, c, s.SessionID, "d2", "delete v2")
	e := c.WaitEvent(t, wait, func(e fixtures.Event) bool {
		return e.AdmissionID == r.AdmissionID && (e.Type == "prompt.opened" || e.Type == "turn.completed")
	})
	if e.Type != "prompt.opened" {
		t.Fatal("an approval given for a sandboxed run let the command run unsandboxed without asking")
	}
	if _, err := os.Stat(filepath.Join(cwd, "v2")); err != nil {
		t.Fatal("ran before the approval")
	}
}
