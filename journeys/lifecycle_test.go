package journeys

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/fixtures"
)

// TestSessionctlLifecycle: a session's whole life from the CLI. A turn
// runs an approved command; show prints the transcript without a terminal
// (the command, its output, the approval and who gave it, the answer);
// approvals lists and revokes the remembered pattern; rename retitles; rm
// is refused while a turn runs, asks first, and once done the session's
// ids answer not found.
func TestSessionctlLifecycle(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	m.On("delete the victim", ctlTerminalCall("rm -rf ./victim && echo removed-it"), fixtures.Reply{Text: "The victim is gone."})
	held := fixtures.NewGate()
	t.Cleanup(held.Release)
	m.On("take your time", fixtures.Reply{Text: "done waiting", Gate: held})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: manual}")})
	home, cwd := d.Home, t.TempDir()
	if err := os.Mkdir(filepath.Join(cwd, "victim"), 0o700); err != nil {
		t.Fatal(err)
	}
	s := newCtlSession(t, home, cwd, "--title", "lifecycle")
	c := d.Dial(t)
	resume(t, c, s)

	del := submit(t, c, s, "del-1", "delete the victim")
	pid := ctlWaitPrompt(t, c, del.AdmissionID)
	ctlWant(t, ctl(t, home, "", "approve", s, pid, "--choice", "session"), 0)
	ctlWaitTurn(t, c, del.AdmissionID)

	// show: plain text, no terminal (stdin is not one here).
	r := ctl(t, home, "", "show", s)
	ctlWant(t, r, 0)
	for _, want := range []string{"session " + s + "  lifecycle", "you › delete the victim", "$ rm -rf ./victim && echo removed-it",
		": session by sessionctl/", "(connection ", "│ removed-it", "↳ exit 0", "assistant › The victim is gone.", "── turn completed ──"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("show lacks %q:\n%s", want, r.stdout)
		}
	}
	var tr struct {
		SessionID string `json:"session_id"`
		Items     []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Name     string `json:"name"`
			Approval *struct {
				Pattern    string            `json:"pattern"`
				Resolution string            `json:"resolution"`
				Choice     string            `json:"choice"`
				AnsweredBy map[string]string `json:"answered_by"`
			} `json:"approval"`
			Result  json.RawMessage `json:"result"`
			Outcome string          `json:"outcome"`
		} `json:"items"`
	}
	r = ctl(t, home, "", "show", s, "--json")
	ctlWant(t, r, 0)
	if err := json.Unmarshal([]byte(r.stdout), &tr); err != nil || tr.SessionID != s || len(tr.Items) != 4 {
		t.Fatalf("show --json (%v): %s", err, r.stdout)
	}
	call := tr.Items[1]
	if tr.Items[0].Type != "user" || call.Type != "tool_call" || call.Name != "terminal" || call.Approval == nil ||
		call.Approval.Resolution != "answered" || call.Approval.Choice != "session" || !strings.HasPrefix(call.Approval.AnsweredBy["client"], "sessionctl/") ||
		call.Approval.AnsweredBy["conn"] == "" || !strings.Contains(string(call.Result), "removed-it") ||
		tr.Items[2].Type != "assistant" || tr.Items[3].Type != "turn" || tr.Items[3].Outcome != "completed" {
		t.Fatalf("show --json items: %s", r.stdout)
	}
	pattern := call.Approval.Pattern
	if pattern == "" {
		t.Fatalf("the approval has no pattern: %s", r.stdout)
	}

	// Shell completion offers the daemon's session ids with their titles.
	r = ctl(t, home, "", "__complete", "show", "")
	if !strings.Contains(r.stdout, s+"\tlifecycle") {
		t.Fatalf("completion of show's SESSION: %s", r)
	}

	// approvals: the "session" choice is remembered for s only.
	r = ctl(t, home, "", "approvals", "ls", "--session", s)
	ctlWant(t, r, 0)
	if !strings.Contains(r.stdout, pattern) || !strings.Contains(r.stdout, "session "+s) {
		t.Fatalf("approvals ls --session:\n%s", r.stdout)
	}
	if r = ctl(t, home, "", "approvals"); !strings.Contains(r.stdout, "no remembered approvals") {
		t.Fatalf("approvals without --session lists a session pattern:\n%s", r.stdout)
	}
	ctlWant(t, ctl(t, home, "", "approvals", "rm", pattern), 4, "no always approval")
	r = ctl(t, home, "", "approvals", "rm", pattern, "--session", s)
	ctlWant(t, r, 0)
	if !strings.Contains(r.stdout, "revoked "+pattern+" for session "+s) {
		t.Fatalf("approvals rm: %s", r)
	}
	ctlWant(t, ctl(t, home, "", "approvals", "rm", pattern, "--session", s), 4, "no session approval")
	ctlWant(t, ctl(t, home, "", "approvals", "rm"), 2, "PATTERN")
	ctlWant(t, ctl(t, home, "", "approvals", "frob"), 2, "ls or rm")

	// rename
	r = ctl(t, home, "", "rename", s, "renamed journey")
	ctlWant(t, r, 0)
	if r = ctl(t, home, "", "sessions"); !strings.Contains(r.stdout, "renamed journey") {
		t.Fatalf("sessions after rename:\n%s", r.stdout)
	}
	ctlWant(t, ctl(t, home, "", "rename", s, " "), 2, "blank")
	ctlWant(t, ctl(t, home, "", "rename", "ses_nope", "x"), 4, "unknown session")

	// rm: refused while a turn runs; asks first; then the ids are gone.
	wait1 := submit(t, c, s, "wait-1", "take your time")
	c.WaitEvent(t, wait, func(e fixtures.Event) bool { return e.Type == "turn.started" && e.AdmissionID == wait1.AdmissionID })
	ctlWant(t, ctl(t, home, "", "rm", s, "--yes"), 1, "runs a turn", ctlCmd(t, home, "interrupt", s))
	held.Release()
	ctlWaitTurn(t, c, wait1.AdmissionID)
	r = ctl(t, home, "n\n", "rm", s)
	ctlWant(t, r, 1, "not deleted")
	if !strings.Contains(r.stderr, "renamed journey") || !strings.Contains(r.stderr, "Delete it") {
		t.Fatalf("rm did not show the session first; %s", r)
	}
	r = ctl(t, home, "y\n", "rm", s)
	ctlWant(t, r, 0)
	if r.stdout != "deleted "+s+"\n" {
		t.Fatalf("rm: %s", r)
	}
	ctlWant(t, ctl(t, home, "", "show", s), 4, "unknown session")
	ctlWant(t, ctl(t, home, "", "rm", s, "--yes"), 4, "unknown session")
	ctlWant(t, ctl(t, home, "", "send", s, "hello"), 4, "unknown session")
	if strings.Contains(ctl(t, home, "", "sessions").stdout, s) {
		t.Fatal("sessions still lists the deleted session")
	}
	// The audit log names the deletion and who answered the approval.
	logs := d.Stderr()
	for _, want := range []string{"session deleted", "prompt answered", "choice=session", "client=sessionctl/"} {
		if !strings.Contains(logs, want) {
			t.Fatalf("the daemon's log lacks %q:\n%s", want, logs)
		}
	}
}
