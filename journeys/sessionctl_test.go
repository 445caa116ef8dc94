package journeys

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/fixtures"
)

// newCtlSession creates a session with `sessionctl new` and returns its id.
func newCtlSession(t *testing.T, home, cwd string, extra ...string) string {
	t.Helper()
	r := ctl(t, home, "", append([]string{"new", "--cwd", cwd}, extra...)...)
	ctlWant(t, r, 0)
	id := strings.TrimSpace(r.stdout)
	if id == "" || strings.Contains(id, "\n") {
		t.Fatalf("new printed %q, want one session id", r.stdout)
	}
	return id
}

func ctlClarifyCall(args string) fixtures.Reply {
	return fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{Name: "clarify", Arguments: args}}}
}

func ctlTerminalCall(command string) fixtures.Reply {
	b, _ := json.Marshal(map[string]string{"command": command})
	return fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{Name: "terminal", Arguments: string(b)}}}
}

// toolResults returns the tool messages the model received for requests
// whose last user text is text.
func ctlToolResults(m *fixtures.FakeModel, text string) []string {
	var out []string
	reqs := m.RequestsWithLastUser(text)
	if len(reqs) == 0 {
		return nil
	}
	for _, msg := range reqs[len(reqs)-1].Messages {
		{
			if s, ok := msg.Content.(string); ok && msg.Role == "tool" {
				out = append(out, s)
			}
		}
	}
	return out
}

// TestSessionctlAttach drives the terminal UI through tmux: approve a
// dangerous command with one key, answer a clarification by choice and by
// free text, see a queued input, interrupt with Ctrl-C, survive a daemon
// crash (reconnect, unknown input, operator resolve) and detach.
func TestSessionctlAttach(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	m.On("delete the victim", ctlTerminalCall("rm -rf ./victim && echo removed-it"), fixtures.Reply{Text: "The victim is gone."})
	m.On("pick a color", ctlClarifyCall(`{"question":"Which color?","choices":["red","blue"]}`), fixtures.Reply{Text: "Blue it is."})
	m.On("name a pet", ctlClarifyCall(`{"question":"What is your pet called?"}`), fixtures.Reply{Text: "Lovely name."})
	held := fixtures.NewGate()
	m.On("long story", fixtures.Reply{Text: "Once upon a time there was a daemon", StreamGate: held})
	crash := fixtures.NewGate()
	m.On("crash story", fixtures.Reply{Text: "This turn never ends", StreamGate: crash})
	m.On("steer me", ctlTerminalCall(stWaitCmd))
	m.On("and steer this", fixtures.Reply{Text: "Steered."})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: manual}")})
	cwd := t.TempDir()
	if err := os.Mkdir(filepath.Join(cwd, "victim"), 0o700); err != nil {
		t.Fatal(err)
	}
	s := newCtlSession(t, d.Home, cwd, "--title", "tmux journey")
	ctlWant(t, ctl(t, d.Home, "", "send", s, "warm up"), 0)

	env := []string{"-u", "SESSIOND_HOME", "GORACE=halt_on_error=1 atexit_sleep_ms=0", "HOME=" + t.TempDir()}
	p := ctlStartTmux(t, env, fixtures.BuildBinary(t, "./cmd/sessionctl"), "--home", d.Home, "attach", s)
	p.waitText("attached to session "+s, "tmux journey", "● connected", "idle",
		"you › warm up", "assistant › ok: warm up", "── live ──") // the transcript so far

	// An approval: command, cwd and reason on screen; one key answers.
	p.typeText("delete the victim")
	p.keys("Enter")
	p.waitText("you › delete the victim", "approval needed", "terminal waiting for approval: ", "command rm -rf ./victim && echo removed-it", "cwd     "+cwd, "reason  ", "[o] once", "[d] deny")
	p.typeText("o")
	p.waitText("approval: once", "removed-it", "↳ exit 0", "assistant › The victim is gone.", "turn completed")
	if _, err := os.Stat(filepath.Join(cwd, "victim")); !os.IsNotExist(err) {
		t.Fatalf("the approved command did not run: stat victim: %v", err)
	}

	// A clarification answered by picking a choice.
	p.typeText("pick a color")
	p.keys("Enter")
	p.waitText("Which color?", "1) red", "2) blue", "answer>")
	p.typeText("2")
	p.keys("Enter")
	p.waitText("clarify answered: blue", "assistant › Blue it is.")
	if res := ctlToolResults(m, "pick a color"); len(res) == 0 || !strings.Contains(res[len(res)-1], `"answer":"blue"`) {
		t.Fatalf("the model got tool results %q, want the clarify answer blue last", res)
	}

	// A clarification answered with free text.
	p.typeText("name a pet")
	p.keys("Enter")
	// The question shows on the tool's line before the prompt opens: wait
	// for the answer line, or the text goes to the input line.
	p.waitText("What is your pet called?", "answer>")
	p.typeText("Sir Fluffington")
	p.keys("Enter")
	p.waitText("clarify answered: Sir Fluffington", "assistant › Lovely name.")

	// A line typed while a command runs is steered into the turn by
	// default: the model gets it after the tool result, in the same turn.
	p.typeText("steer me")
	p.keys("Enter")
	fixtures.Eventually(t, wait, "the command to start", func() bool { return trExists(filepath.Join(cwd, "started")) })
	p.waitText("turn running", "Enter steers into it (Tab: queue)")
	p.typeText("and steer this")
	p.keys("Enter")
	if err := os.WriteFile(filepath.Join(cwd, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p.waitText("and steer this (steered into the running turn)", "assistant › Steered.")
	if reqs := m.RequestsWithLastUser("and steer this"); len(reqs) != 1 || trRoles(reqs[0]) != strings.TrimSuffix(trRoles(reqs[0]), ",assistant,tool,user")+",assistant,tool,user" {
		t.Fatalf("the steer reached the model in %d requests, want 1 after the tool result", len(reqs))
	}
	if n := len(m.RequestsWithLastUser("steer me")); n != 1 {
		t.Fatalf("the steered turn asked the model %d times about its own input, want 1", n)
	}

	// A queued input while a turn streams (Tab: queue rather than steer);
	// Ctrl-C interrupts the turn and the queue moves on.
	p.typeText("long story")
	p.keys("Enter")
	<-held.Waiting()
	p.waitText("assistant › Once", "turn running")
	p.keys("Tab")
	p.waitText("Enter queues (Tab: steer)")
	p.typeText("follow up")
	p.keys("Enter")
	p.waitText("queued #", "(waits: busy): follow up")
	p.keys("C-c")
	p.waitText("turn interrupted", "assistant › ok: follow up")
	p.waitFor("the follow-up turn to finish", func(s string) bool { return strings.Count(s, "turn completed") >= 5 })

	// A daemon crash mid-turn: attach says so, reconnects to the new
	// daemon by itself and shows the unknown input; an operator resolves.
	p.typeText("crash story")
	p.keys("Enter")
	<-crash.Waiting()
	p.waitText("assistant › This")
	d.SIGKILL(t)
	p.waitText("connection lost")
	d.Restart(t)
	// The pending line names the resolve command (clipped to the width;
	// the full one is printed above it, wrapped).
	p.waitText("reconnected to sessiond pid", "unknown #", "— resolve: "+ctlQuote(fixtures.BuildBinary(t, "./cmd/sessionctl"))+" --home")
	var pend ctlPendingJSON
	r := ctl(t, d.Home, "", "pending", s, "--json")
	ctlWant(t, r, 0)
	if err := json.Unmarshal([]byte(r.stdout), &pend); err != nil || len(pend.Pending) != 1 || pend.Pending[0].Status != "unknown" {
		t.Fatalf("pending --json = %s (%v)", r.stdout, err)
	}
	ctlWant(t, ctl(t, d.Home, "", "resolve", s, pend.Pending[0].AdmissionID, "--yes"), 0)
	p.waitText("turn interrupted: resolved by operator after a crash")
	p.waitScreen("idle")

	// Ctrl-C while nothing runs detaches; the session stays.
	p.keys("C-c")
	if code := p.exited(); code != 0 {
		t.Fatalf("attach exited %d after detaching", code)
	}
	p.waitText("detached from session " + s)
}

// ctlSessionLine reports whether the sessions table has a row for
// sessionID whose STATE is state.
func ctlSessionLine(table, sessionID, state string) bool {
	for _, line := range strings.Split(table, "\n") {
		if strings.HasPrefix(line, sessionID+" ") {
			return strings.Contains(line, "  "+state+"  ")
		}
	}
	return false
}

// ctlListedSession is a row of `sessionctl sessions --json` (session.list).
type ctlListedSession struct {
	SessionID       string  `json:"session_id"`
	Running         *string `json:"running"`
	PendingCount    int     `json:"pending_count"`
	UnknownCount    int     `json:"unknown_count"`
	OpenPromptCount int     `json:"open_prompt_count"`
}

// ctlListed returns session sessionID's row of `sessionctl sessions --json`.
func ctlListed(t *testing.T, home, sessionID string) ctlListedSession {
	t.Helper()
	r := ctl(t, home, "", "sessions", "--json")
	ctlWant(t, r, 0)
	var listed struct {
		Sessions []ctlListedSession `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil {
		t.Fatalf("sessions --json: %v\n%s", err, r)
	}
	for _, l := range listed.Sessions {
		if l.SessionID == sessionID {
			return l
		}
	}
	t.Fatalf("sessions --json has no row for %s:\n%s", sessionID, r.stdout)
	return ctlListedSession{}
}

type ctlPendingJSON struct {
	Pending []receipt `json:"pending"`
	Prompts []struct {
		PromptID string `json:"prompt_id"`
		Kind     string `json:"kind"`
	} `json:"prompts"`
}

// ctlWaitPrompt waits for a prompt.opened event of admissionID and returns
// the prompt id.
func ctlWaitPrompt(t *testing.T, c *fixtures.Client, admissionID string) string {
	t.Helper()
	ev := c.WaitEvent(t, wait, func(e fixtures.Event) bool { return e.Type == "prompt.opened" && e.AdmissionID == admissionID })
	var p struct {
		Prompt struct {
			PromptID string `json:"prompt_id"`
		} `json:"prompt"`
	}
	if err := json.Unmarshal(ev.Payload, &p); err != nil || p.Prompt.PromptID == "" {
		t.Fatalf("prompt.opened payload %s: %v", ev.Payload, err)
	}
	return p.Prompt.PromptID
}

func ctlWaitTurn(t *testing.T, c *fixtures.Client, admissionID string) {
	t.Helper()
	c.WaitEvent(t, wait, func(e fixtures.Event) bool { return e.Type == "turn.completed" && e.AdmissionID == admissionID })
}

// TestSessionctlVerbs runs every non-interactive verb against a real
// daemon and the fake model, and checks the exit codes and the one-line
// errors of the documented failure cases.
func TestSessionctlVerbs(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	m.On("hello", fixtures.Reply{Text: "general kenobi"})
	m.On("count once", fixtures.Reply{Text: "one"})
	m.On("fail please", fixtures.Reply{Status: 400, Text: `{"error":{"message":"the fake model refuses","type":"invalid_request_error"}}`})
	held := fixtures.NewGate()
	m.On("held", fixtures.Reply{Text: "finally", Gate: held})
	m.On("delete the victim", ctlTerminalCall("rm -rf ./victim"), fixtures.Reply{Text: "as you wish"})
	m.On("ask color", ctlClarifyCall(`{"question":"Which color?","choices":["red","blue"]}`), fixtures.Reply{Text: "noted"})
	crash := fixtures.NewGate()
	m.On("crash story", fixtures.Reply{Text: "never finished", StreamGate: crash})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: manual}")})
	home := d.Home
	cwd := t.TempDir()

	// status
	r := ctl(t, home, "", "status")
	ctlWant(t, r, 0)
	if !strings.Contains(r.stdout, "pid            "+strconv.Itoa(d.PID())) || !strings.Contains(r.stdout, d.Desc.URL) {
		t.Fatalf("status output:\n%s", r.stdout)
	}
	var info struct {
		PID      int    `json:"pid"`
		Protocol int    `json:"protocol"`
		URL      string `json:"url"`
	}
	r = ctl(t, home, "", "status", "--json")
	if json.Unmarshal([]byte(r.stdout), &info) != nil || info.PID != d.PID() || info.Protocol != 1 || info.URL != d.Desc.URL {
		t.Fatalf("status --json: %s", r)
	}

	// new, sessions
	s := newCtlSession(t, home, cwd, "--title", "verbs journey")
	r = ctl(t, home, "", "new", "--cwd", cwd, "--tools", "none", "--json")
	ctlWant(t, r, 0)
	var snap snapshot
	if json.Unmarshal([]byte(r.stdout), &snap) != nil || snap.Cwd != cwd || len(snap.Toolsets) != 0 || snap.Model != fixtures.FakeModelName {
		t.Fatalf("new --json: %s", r)
	}
	// The daemon refuses the missing cwd (invalid_params): a refusal is 1,
	// 2 is only for what sessionctl finds wrong before asking.
	ctlWant(t, ctl(t, home, "", "new", "--cwd", filepath.Join(cwd, "missing")), 1, "cwd")
	r = ctl(t, home, "", "sessions")
	ctlWant(t, r, 0)
	if !strings.Contains(r.stdout, "SESSION") || !strings.Contains(r.stdout, s) || !strings.Contains(r.stdout, "verbs journey") {
		t.Fatalf("sessions:\n%s", r.stdout)
	}
	var list struct {
		Sessions []struct {
			SessionID string `json:"session_id"`
		} `json:"sessions"`
	}
	r = ctl(t, home, "", "sessions", "--json")
	if json.Unmarshal([]byte(r.stdout), &list) != nil || len(list.Sessions) != 2 || list.Sessions[1].SessionID != s {
		t.Fatalf("sessions --json: %s", r)
	}

	// send: the reply on stdout, exit 0; --json; idempotent --input-id;
	// text from stdin; a failed turn exits 1.
	r = ctl(t, home, "", "send", s, "hello")
	ctlWant(t, r, 0)
	if r.stdout != "general kenobi\n" {
		t.Fatalf("send printed %q", r.stdout)
	}
	var sent struct {
		AdmissionID string  `json:"admission_id"`
		Outcome     string  `json:"outcome"`
		Reply       string  `json:"reply"`
		Receipt     receipt `json:"receipt"`
	}
	r = ctl(t, home, "", "send", s, "count once", "--input-id", "journey-count-1", "--json")
	ctlWant(t, r, 0)
	if json.Unmarshal([]byte(r.stdout), &sent) != nil || sent.Outcome != "completed" || sent.Reply != "one" || sent.Receipt.Status != "terminal" {
		t.Fatalf("send --json: %s", r)
	}
	first := sent.AdmissionID
	r = ctl(t, home, "", "send", s, "count once", "--input-id", "journey-count-1", "--json")
	ctlWant(t, r, 0)
	if json.Unmarshal([]byte(r.stdout), &sent) != nil || sent.AdmissionID != first || !sent.Receipt.Duplicate || sent.Reply != "one" {
		t.Fatalf("repeated send --json: %s", r)
	}
	if n := len(m.RequestsWithLastUser("count once")); n != 1 {
		t.Fatalf("the same input id reached the model %d times", n)
	}
	ctlWant(t, ctl(t, home, "", "send", s, "count once, differently", "--input-id", "journey-count-1"), 1, "different text")
	r = ctl(t, home, "hello", "send", s, "-")
	ctlWant(t, r, 0)
	if r.stdout != "general kenobi\n" {
		t.Fatalf("send - printed %q", r.stdout)
	}
	ctlWant(t, ctl(t, home, "", "send", s, "fail please"), 1, "turn failed", "the fake model refuses")

	// pending, cancel, interrupt
	c := d.Dial(t)
	resume(t, c, s)
	run := submit(t, c, s, "held-1", "held")
	<-held.Waiting()
	// send --timeout gives up with its own exit code; the turn goes on.
	r = ctl(t, home, "", "send", s, "held", "--input-id", "held-1", "--timeout", "1s")
	ctlWant(t, r, 5, "gave up waiting after 1s", "the turn continues in the daemon")
	r = ctl(t, home, "", "send", s, "held", "--input-id", "held-1", "--timeout", "1s", "--json")
	ctlWant(t, r, 5, "gave up waiting after 1s")
	var pendingSend struct {
		AdmissionID string `json:"admission_id"`
		Outcome     string `json:"outcome"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &pendingSend); err != nil || pendingSend.AdmissionID != run.AdmissionID || pendingSend.Outcome != "pending" {
		t.Fatalf("send --json --timeout printed %q (%v), want admission %s pending", r.stdout, err, run.AdmissionID)
	}
	r = ctl(t, home, "", "sessions")
	if !ctlSessionLine(r.stdout, s, "running") {
		t.Fatalf("sessions does not show %s running:\n%s", s, r.stdout)
	}
	queued := submit(t, c, s, "queued-1", "queued behind")
	r = ctl(t, home, "", "pending", s)
	ctlWant(t, r, 0)
	for _, want := range []string{run.AdmissionID, "started", queued.AdmissionID, "queued (busy)", "queued behind"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("pending does not show %q:\n%s", want, r.stdout)
		}
	}
	var pend ctlPendingJSON
	r = ctl(t, home, "", "pending", s, "--json")
	if json.Unmarshal([]byte(r.stdout), &pend) != nil || len(pend.Pending) != 2 || pend.Pending[1].Reason != "busy" {
		t.Fatalf("pending --json: %s", r)
	}
	r = ctl(t, home, "", "cancel", s, queued.AdmissionID)
	ctlWant(t, r, 0)
	if !strings.Contains(r.stdout, "cancelled "+queued.AdmissionID) {
		t.Fatalf("cancel: %s", r)
	}
	ctlWant(t, ctl(t, home, "", "cancel", s, queued.AdmissionID), 1, "no longer queued")
	ctlWant(t, ctl(t, home, "", "cancel", s, "adm_nope"), 4)
	r = ctl(t, home, "", "interrupt", s)
	ctlWant(t, r, 0)
	if !strings.Contains(r.stdout, "interrupted "+run.AdmissionID) {
		t.Fatalf("interrupt: %s", r)
	}
	r = ctl(t, home, "", "interrupt", s)
	ctlWant(t, r, 0)
	if !strings.Contains(r.stdout, "nothing was running") {
		t.Fatalf("second interrupt: %s", r)
	}
	held.Release()

	// approve: the prompt shows in pending; deny keeps the victim.
	if err := os.Mkdir(filepath.Join(cwd, "victim"), 0o700); err != nil {
		t.Fatal(err)
	}
	// send says which command answers the prompt its turn waits on.
	delSend := ctlStart(t, home, "send", s, "delete the victim", "--input-id", "delete-1")
	del := submit(t, c, s, "delete-1", "delete the victim") // the same admission as send's
	pid := ctlWaitPrompt(t, c, del.AdmissionID)
	r = ctl(t, home, "", "sessions")
	if !ctlSessionLine(r.stdout, s, "waiting for you") {
		t.Fatalf("sessions does not show %s waiting on its approval:\n%s", s, r.stdout)
	}
	if l := ctlListed(t, home, s); l.OpenPromptCount != 1 || l.Running == nil || *l.Running != del.AdmissionID || l.UnknownCount != 0 {
		t.Fatalf("session.list row while the approval waits: %+v", l)
	}
	ctlWant(t, ctl(t, home, "", "status"), 0, "waiting for you  1 prompt(s)")
	r = ctl(t, home, "", "pending", s)
	if !strings.Contains(r.stdout, pid) || !strings.Contains(r.stdout, "approval") || !strings.Contains(r.stdout, "rm -rf ./victim") {
		t.Fatalf("pending does not show the approval prompt:\n%s", r.stdout)
	}
	ctlWant(t, ctl(t, home, "", "approve", s, pid, "--choice", "maybe"), 2, "--choice")
	ctlWant(t, ctl(t, home, "", "approve", s, pid), 2, "--choice")
	ctlWant(t, ctl(t, home, "", "approve", s, "prm_nope", "--choice", "once"), 4)
	ctlWant(t, ctl(t, home, "", "answer", s, pid, "yes"), 2, "is an approval", ctlCmd(t, home, "approve", s, pid, "--choice"))
	r = ctl(t, home, "", "approve", s, pid, "--choice", "deny")
	ctlWant(t, r, 0)
	if !strings.Contains(r.stdout, "approval deny sent for "+pid) {
		t.Fatalf("approve: %s", r)
	}
	ctlWaitTurn(t, c, del.AdmissionID)
	if _, err := os.Stat(filepath.Join(cwd, "victim")); err != nil {
		t.Fatalf("a denied command ran: %v", err)
	}
	r = delSend.wait(t)
	ctlWant(t, r, 0)
	if r.stdout != "as you wish\n" || strings.Count(r.stderr, "sessionctl: note:") != 1 ||
		!strings.Contains(r.stderr, "approval to run `rm -rf ./victim`") || !strings.Contains(r.stderr, "`"+ctlCmd(t, home, "approve", s, pid, "--choice", "once")+"`") {
		t.Fatalf("send with an approval; %s", r)
	}
	ctlWant(t, ctl(t, home, "", "approve", s, pid, "--choice", "once"), 1, "no longer answerable")

	// answer: a clarify prompt.
	askSend := ctlStart(t, home, "send", s, "ask color", "--input-id", "ask-1")
	ask := submit(t, c, s, "ask-1", "ask color")
	pid = ctlWaitPrompt(t, c, ask.AdmissionID)
	ctlWant(t, ctl(t, home, "", "approve", s, pid, "--choice", "once"), 2, "is a clarify question", ctlCmd(t, home, "answer", s, pid, "TEXT"))
	r = ctl(t, home, "", "answer", s, pid, "blue")
	ctlWant(t, r, 0)
	ctlWaitTurn(t, c, ask.AdmissionID)
	r = askSend.wait(t)
	ctlWant(t, r, 0)
	if r.stdout != "noted\n" || !strings.Contains(r.stderr, "asks: Which color? [red/blue]") ||
		!strings.Contains(r.stderr, "`"+ctlCmd(t, home, "answer", s, pid, "red")+"` (choices: red, blue)") {
		t.Fatalf("send with a clarify question; %s", r)
	}
	if res := ctlToolResults(m, "ask color"); len(res) == 0 || !strings.Contains(res[len(res)-1], `"answer":"blue"`) {
		t.Fatalf("the model got tool results %q", res)
	}
	ctlWant(t, ctl(t, home, "", "answer", s, pid), 2)

	// send survives a daemon crash: it reconnects to the restarted daemon
	// and reports the admission unknown; a stale descriptor meanwhile is
	// explained; resolve asks first.
	bg := ctlStart(t, home, "send", s, "crash story")
	<-crash.Waiting()
	d.SIGKILL(t)
	ctlWant(t, ctl(t, home, "", "status"), 3, "is gone")
	d.Restart(t)
	r = bg.wait(t)
	ctlWant(t, r, 1, "unknown", ctlCmd(t, home, "resolve", s))
	if !strings.Contains(r.stderr, "reconnected") {
		t.Fatalf("send did not say it reconnected; %s", r)
	}
	r = ctl(t, home, "", "pending", s, "--json")
	if json.Unmarshal([]byte(r.stdout), &pend) != nil || len(pend.Pending) != 1 || pend.Pending[0].Status != "unknown" {
		t.Fatalf("pending --json after the crash: %s", r)
	}
	unknown := pend.Pending[0]
	// The unknown admission holds the session: interrupt and sessions say so.
	r = ctl(t, home, "", "interrupt", s)
	ctlWant(t, r, 0)
	if !strings.Contains(r.stdout, "nothing was running, but admission "+unknown.AdmissionID+" is unknown") ||
		!strings.Contains(r.stdout, ctlCmd(t, home, "resolve", s, unknown.AdmissionID)) {
		t.Fatalf("interrupt on a held session: %s", r)
	}
	r = ctl(t, home, "", "sessions")
	if !ctlSessionLine(r.stdout, s, "held (unknown)") {
		t.Fatalf("sessions does not show %s held:\n%s", s, r.stdout)
	}
	if l := ctlListed(t, home, s); l.UnknownCount != 1 || l.Running != nil || l.OpenPromptCount != 0 {
		t.Fatalf("session.list row of the held session: %+v", l)
	}
	ctlWant(t, ctl(t, home, "", "status"), 0, "held", "1 session(s) behind an input left unknown by a crash", ctlCmd(t, home, "resolve", s, unknown.AdmissionID))
	r = ctl(t, home, "n\n", "resolve", s, unknown.AdmissionID)
	ctlWant(t, r, 1, "not resolved")
	if !strings.Contains(r.stderr, "crash story") || !strings.Contains(r.stderr, "generation "+strconv.FormatInt(*unknown.ExecutionGeneration, 10)) {
		t.Fatalf("resolve did not show the admission first; %s", r)
	}
	gen := *unknown.ExecutionGeneration
	ctlWant(t, ctl(t, home, "", "resolve", s, unknown.AdmissionID, "--yes", "--generation", strconv.FormatInt(gen+1, 10)), 1,
		fmt.Sprintf("is unknown with generation %d, not %d: nothing resolved", gen, gen+1))
	r = ctl(t, home, "y\n", "resolve", s, unknown.AdmissionID)
	ctlWant(t, r, 0)
	if !strings.Contains(r.stdout, "resolved "+unknown.AdmissionID+": terminal/interrupted") {
		t.Fatalf("resolve: %s", r)
	}
	if !strings.Contains(d.Stderr(), "an unknown admission was resolved by a client") || !strings.Contains(d.Stderr(), unknown.AdmissionID) {
		t.Fatalf("the operator's decision is not in the daemon's log:\n%s", d.Stderr())
	}
	if r = ctl(t, home, "", "sessions"); !ctlSessionLine(r.stdout, s, "idle") {
		t.Fatalf("sessions does not show %s idle after resolve:\n%s", s, r.stdout)
	}
	ctlWant(t, ctl(t, home, "", "resolve", s, unknown.AdmissionID, "--yes"), 1, "not pending")
	ctlWant(t, ctl(t, home, "", "resolve", s, unknown.AdmissionID, "--yes", "--generation", strconv.FormatInt(*unknown.ExecutionGeneration, 10)), 1, "not unknown")

	// The documented failures: one line each, non-zero exit.
	nowhere := t.TempDir()
	// The hint shell-quotes the home, e.g. for a TMPDIR with a space.
	qnowhere := ctlQuote(nowhere)
	ctlWant(t, ctl(t, nowhere, "", "status"), 3, "no daemon running for home "+nowhere+" (from --home)", "daemon.json",
		"`sessiond --home "+qnowhere+"`", "`SESSIOND_HOME="+qnowhere+" make run`")
	wrong := t.TempDir()
	desc := d.Desc
	desc.Token = strings.Repeat("0", len(desc.Token))
	b, _ := json.Marshal(desc)
	if err := os.WriteFile(filepath.Join(wrong, "daemon.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	ctlWant(t, ctl(t, wrong, "", "sessions"), 3, "refused the token", "401")
	ctlWant(t, ctl(t, home, "", "send", "ses_nope", "hi"), 4, "unknown session")
	ctlWant(t, ctl(t, home, "", "pending", "ses_nope"), 4, "unknown session")
	ctlWant(t, ctl(t, home, "", "interrupt", "ses_nope"), 4, "unknown session")
	ctlWant(t, ctl(t, home, "", "send", s), 2, "SESSION TEXT")
	ctlWant(t, ctl(t, home, "", "frobnicate"), 2, "unknown command")
	ctlWant(t, ctl(t, home, "", "attach", s), 2, "terminal")
}

// TestSessionctlHelp: --help documents the exit codes once and every verb
// has examples and points to them.
func TestSessionctlHelp(t *testing.T) {
	home := t.TempDir()
	r := ctl(t, home, "", "--help")
	ctlWant(t, r, 0)
	for _, want := range []string{"Exit codes (the same for every verb):", "\n  2    usage error", "\n  5    --timeout passed", "Examples:"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("sessionctl --help lacks %q:\n%s", want, r.stdout)
		}
	}
	for _, verb := range []string{"status", "sessions", "new", "attach", "send", "pending", "resolve", "cancel", "interrupt", "approve", "answer", "rename", "rm", "show", "approvals", "completion"} {
		r := ctl(t, home, "", verb, "--help")
		ctlWant(t, r, 0)
		if !strings.Contains(r.stdout, "Examples:\n  sessionctl") && !strings.Contains(r.stdout, "Examples:\n  S=") {
			t.Errorf("sessionctl %s --help has no examples:\n%s", verb, r.stdout)
		}
		if !strings.Contains(r.stdout, "Exit codes: 0 on success; the others are listed once in `sessionctl --help`.") || strings.Contains(r.stdout, "130  ") {
			t.Errorf("sessionctl %s --help does not point to the root's exit codes (or repeats them):\n%s", verb, r.stdout)
		}
	}
}
