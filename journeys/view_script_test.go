package journeys

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/fixtures"
)

// TestViewScriptWrittenThenRunAsks (issue 22, finding 9): two steps that
// are each rated safe — write a script in the workspace, then run it —
// planted code no person saw. A script that an earlier command of the
// same turn wrote is now rated as unseen code: running it opens an
// approval prompt, and denying it runs nothing.
func TestViewScriptWrittenThenRunAsks(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: manual, timeout: 60}")})
	c := d.Dial(t)
	work := t.TempDir()
	s := createSession(t, c, map[string]any{"cwd": work})
	resume(t, c, s.SessionID)
	proof := filepath.Join(work, "ran")
	m.On("two steps",
		fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{atkTerm(`printf 'touch ran\n' > s.sh`)}},
		fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{atkTerm(`sh s.sh`)}},
		fixtures.Reply{Text: "done"})
	r := submit(t, c, s.SessionID, "two-steps", "two steps")
	e := c.WaitEvent(t, wait, func(e fixtures.Event) bool {
		return e.AdmissionID == r.AdmissionID && (e.Type == "prompt.opened" || e.Type == "turn.completed")
	})
	if e.Type != "prompt.opened" {
		t.Fatalf("the script written by the turn's first command ran without asking anyone (ran: %v)", exists(proof))
	}
	var p struct {
		Prompt prompt `json:"prompt"`
	}
	json.Unmarshal(e.Payload, &p)
	if _, err := answerApproval(t, c, s.SessionID, p.Prompt, "deny"); err != nil {
		t.Fatal(err)
	}
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("turn: %s", out)
	}
	if exists(proof) {
		t.Fatal("the denied script ran")
	}
	// The same file in the next turn, written before it began, is what a
	// person could have read since: it runs as the classifier rates it.
	m.On("run again", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{atkTerm(`sh s.sh`)}}, fixtures.Reply{Text: "done"})
	r = submit(t, c, s.SessionID, "run-again", "run again")
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("turn: %s", out)
	}
	if !exists(proof) {
		t.Fatal("a script from an earlier turn was refused")
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestViewRelativePathIntoHomeAsks: with sandbox mode off the classifier
// is the only wall, and a relative path into the daemon's home from a
// session whose cwd contains it (make run's ./.home) was rated safe: "cat
// .h/daemon.json" read the token without a prompt (found by a new user
// trying the README). It now asks like the absolute spelling.
func TestViewRelativePathIntoHomeAsks(t *testing.T) {
	work := t.TempDir()
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Home: filepath.Join(work, ".h"),
		Config: fixtures.FakeModelConfig(m, "approvals: {mode: manual, timeout: 60}\nsandbox: {mode: off}")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{"cwd": work})
	resume(t, c, s.SessionID)
	for i, cmd := range []string{`cat .h/daemon.json`, `cd .h && cat daemon.json`} {
		text := fmt.Sprintf("read it %d", i)
		m.On(text, fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{atkTerm(cmd)}}, fixtures.Reply{Text: "done"})
		r := submit(t, c, s.SessionID, fmt.Sprintf("rel-%d", i), text)
		e := c.WaitEvent(t, wait, func(e fixtures.Event) bool {
			return e.AdmissionID == r.AdmissionID && (e.Type == "prompt.opened" || e.Type == "turn.completed")
		})
		if e.Type != "prompt.opened" {
			t.Fatalf("%q ran without asking anyone; the model got: %v", cmd, toolResults(m, text))
		}
		var p struct {
			Prompt prompt `json:"prompt"`
		}
		json.Unmarshal(e.Payload, &p)
		if _, err := answerApproval(t, c, s.SessionID, p.Prompt, "deny"); err != nil {
			t.Fatal(err)
		}
		waitTurn(t, c, r.AdmissionID)
	}
	for _, res := range toolResults(m, "read it") {
		if strings.Contains(res, d.Desc.Token) {
			t.Fatalf("the token reached the model: %s", res)
		}
	}
}
