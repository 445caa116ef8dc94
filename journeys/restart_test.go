package journeys

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/sessiond/sessiond/fixtures"
)

// TestRestartFencesPromptsAndNeverRerunsWork is journey 1 of issue 5: two
// sessions park on an approval (a destructive rm) and on a clarification,
// two followers wait behind each, and the daemon dies (SIGKILL) or stops
// (SIGTERM). The next daemon must never show or accept the old prompts,
// must never run the destructive command nor continue either ask, and must
// run every follower exactly once, in order, as itself.
func TestRestartFencesPromptsAndNeverRerunsWork(t *testing.T) {
	for _, mode := range []string{"SIGKILL", "SIGTERM"} {
		t.Run(mode, func(t *testing.T) { restartFenceJourney(t, mode == "SIGKILL") })
	}
}

// askSide is one session of the restart journey: its ask (parked on a
// prompt) and its two followers.
type askSide struct {
	name       string
	session    string
	askText    string
	callID     string // the ask's tool call id
	followers  [2]string
	ask        receipt
	prompt     prompt
	followRcpt [2]receipt
}

func restartFenceJourney(t *testing.T, crash bool) {
	m := fixtures.NewFakeModel(t)
	cwdA := t.TempDir()
	victim, victimFile := makeVictim(t, cwdA, "build-output")
	rmCommand := "rm -rf -- " + victim

	a := &askSide{name: "A", askText: "clean up the build output", callID: "call_restart_rm",
		followers: [2]string{"A follower one", "A follower two"}}
	b := &askSide{name: "B", askText: "set up the project for me", callID: "call_restart_clarify",
		followers: [2]string{"B follower one", "B follower two"}}
	// The second scripted reply of each ask is what the model would say
	// if the ask ever continued after its tool ran; it must never be used.
	m.On(a.askText,
		fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{ID: a.callID, Name: "terminal", Arguments: jsonArgs(map[string]string{"command": rmCommand})}}},
		fixtures.Reply{Text: "I removed the build output."})
	m.On(b.askText,
		fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{ID: b.callID, Name: "clarify", Arguments: `{"question":"Which language?","choices":["go","rust"]}`}}},
		fixtures.Reply{Text: "Setting up a go project."})
	// Followers get the default reply "ok: <text>".

	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m,
		"approvals: {mode: manual, timeout: 600}\nagent: {clarify_timeout: 600}")})
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	c := d.Dial(t)
	a.session = createSession(t, c, map[string]any{"cwd": cwdA}).SessionID
	b.session = createSession(t, c, map[string]any{}).SessionID

	// Both asks park on their prompts.
	a.ask = submit(t, c, a.session, "a-ask", a.askText)
	a.prompt = waitPrompt(t, c, a.ask.AdmissionID, "approval")
	if p := promptPayload(t, c, a.prompt); p["tool_call_id"] != a.callID || p["command"] != rmCommand {
		t.Fatalf("approval payload = %v, want call %s for %q", p, a.callID, rmCommand)
	}
	b.ask = submit(t, c, b.session, "b-ask", b.askText)
	b.prompt = waitPrompt(t, c, b.ask.AdmissionID, "clarify")
	if p := promptPayload(t, c, b.prompt); p["tool_call_id"] != b.callID {
		t.Fatalf("clarify payload = %v, want call %s", p, b.callID)
	}
	// Two followers behind each.
	for _, s := range []*askSide{a, b} {
		for i, text := range s.followers {
			r := submit(t, c, s.session, strings.ToLower(s.name)+"-follower-"+string(rune('1'+i)), text)
			if r.Status != "queued" || r.Reason != "busy" || r.Duplicate {
				t.Fatalf("follower %q receipt = %+v, want queued/busy", text, r)
			}
			s.followRcpt[i] = r
		}
	}

	// The store: both asks started (with their prompts' generation), four
	// followers queued.
	for _, s := range []*askSide{a, b} {
		rows := fixtures.Admissions(t, db, s.session)
		if len(rows) != 3 {
			t.Fatalf("session %s has %d admissions, want 3: %+v", s.name, len(rows), rows)
		}
		wantRow(t, rows[0], "started", "")
		if rows[0].AdmissionID != s.ask.AdmissionID || rows[0].ExecutionGeneration.Int64 != s.prompt.ExecutionGeneration {
			t.Fatalf("ask row %+v, want %s with generation %d", rows[0], s.ask.AdmissionID, s.prompt.ExecutionGeneration)
		}
		for i := range 2 {
			wantRow(t, rows[i+1], "queued", "")
			if rows[i+1].AdmissionID != s.followRcpt[i].AdmissionID {
				t.Fatalf("row %d is %s, want follower %s", i+1, rows[i+1].AdmissionID, s.followRcpt[i].AdmissionID)
			}
		}
	}

	if crash {
		d.SIGKILL(t)
		for _, s := range []*askSide{a, b} {
			rows := fixtures.Admissions(t, db, s.session)
			wantRow(t, rows[0], "started", "") // no outcome: a dead daemon settles nothing
			wantRow(t, rows[1], "queued", "")
			wantRow(t, rows[2], "queued", "")
		}
	} else {
		if code := d.SIGTERM(t); code != 0 {
			t.Fatalf("SIGTERM exit code %d, want 0", code)
		}
		// The process has exited: what the store holds was committed by it
		// before it exited.
		for _, s := range []*askSide{a, b} {
			rows := fixtures.Admissions(t, db, s.session)
			wantRow(t, rows[0], "terminal", "interrupted")
			wantRow(t, rows[1], "queued", "")
			wantRow(t, rows[2], "queued", "")
		}
	}
	for _, s := range []*askSide{a, b} {
		for _, f := range s.followers {
			if n := len(m.RequestsWithLastUser(f)); n != 0 {
				t.Fatalf("follower %q reached the model %d times before the restart", f, n)
			}
		}
	}
	wantIntact(t, victimFile)

	// A fresh daemon: the old prompts are gone from the snapshots and
	// answering them is refused as stale.
	d.Restart(t)
	c = d.Dial(t)
	staleAnswers := func(when string) {
		t.Helper()
		_, err := answerApproval(t, c, a.session, a.prompt, "once")
		if err == nil {
			t.Fatalf("%s: approving the old rm prompt was accepted", when)
		}
		wantReason(t, err, -32000, "stale_generation")
		_, err = answerClarify(t, c, b.session, b.prompt, "go")
		if err == nil {
			t.Fatalf("%s: answering the old clarify prompt was accepted", when)
		}
		wantReason(t, err, -32000, "stale_generation")
	}
	snaps := map[string]snapshot{}
	for _, s := range []*askSide{a, b} {
		snap := resume(t, c, s.session)
		if len(snap.Prompts) != 0 {
			t.Fatalf("session %s lists prompts of a dead execution after the restart: %+v", s.name, snap.Prompts)
		}
		snaps[s.name] = snap
	}
	staleAnswers("after the restart")
	// In the store the old prompts are closed: fenced by the next boot after
	// a crash, interrupted by the graceful stop.
	wantResolution := map[bool]string{true: "fenced", false: "interrupted"}[crash]
	for _, p := range []prompt{a.prompt, b.prompt} {
		var st struct {
			Status     string `db:"status"`
			Resolution string `db:"resolution"`
		}
		if err := db.Get(&st, `SELECT status, COALESCE(resolution, '') AS resolution FROM prompts WHERE prompt_id = ?`, p.PromptID); err != nil {
			t.Fatal(err)
		}
		if st.Status != "closed" || st.Resolution != wantResolution {
			t.Fatalf("prompt %s is %s/%s in the store, want closed/%s", p.PromptID, st.Status, st.Resolution, wantResolution)
		}
	}

	if crash {
		// The asks are unknown and hold their followers, in order.
		for _, s := range []*askSide{a, b} {
			p := snaps[s.name].Pending
			if len(p) != 3 {
				t.Fatalf("session %s pending = %+v, want the unknown ask and two followers", s.name, p)
			}
			if p[0].AdmissionID != s.ask.AdmissionID || p[0].Status != "unknown" {
				t.Fatalf("session %s pending[0] = %+v, want ask %s unknown", s.name, p[0], s.ask.AdmissionID)
			}
			for i := range 2 {
				if p[i+1].AdmissionID != s.followRcpt[i].AdmissionID || p[i+1].Status != "queued" || p[i+1].Reason != "unknown" {
					t.Fatalf("session %s pending[%d] = %+v, want follower %s queued (reason unknown)", s.name, i+1, p[i+1], s.followRcpt[i].AdmissionID)
				}
			}
		}
		// Resolve A only. Its followers run, which proves the scheduler
		// has been through B's FIFO too: B's followers must still wait.
		resolveUnknownAdmission(t, c, a.session, a.ask.AdmissionID, a.prompt.ExecutionGeneration)
		waitAllTerminal(t, db, a.session)
		rows := fixtures.Admissions(t, db, b.session)
		wantRow(t, rows[0], "unknown", "")
		wantRow(t, rows[1], "queued", "")
		wantRow(t, rows[2], "queued", "")
		for _, f := range b.followers {
			if n := len(m.RequestsWithLastUser(f)); n != 0 {
				t.Fatalf("follower %q ran behind an unknown admission (%d model requests)", f, n)
			}
		}
		staleAnswers("after resolving A")
		resolveUnknownAdmission(t, c, b.session, b.ask.AdmissionID, b.prompt.ExecutionGeneration)
	}
	// Graceful: the followers run by themselves. Crash: they run once
	// resolved.
	for _, s := range []*askSide{a, b} {
		rows := waitAllTerminal(t, db, s.session)
		wantRow(t, rows[0], "terminal", "interrupted")
		wantRow(t, rows[1], "terminal", "completed")
		wantRow(t, rows[2], "terminal", "completed")
	}
	staleAnswers("after the followers ran")

	reqs := m.Requests()
	for _, s := range []*askSide{a, b} {
		// The ask reached the model exactly once and never continued
		// after a tool result.
		askReqs := m.RequestsWithLastUser(s.askText)
		if len(askReqs) != 1 {
			t.Fatalf("ask %s reached the model %d times, want exactly once", s.name, len(askReqs))
		}
		if askReqs[0].LastIsToolResult {
			t.Fatalf("ask %s was continued after a tool result", s.name)
		}
		// No request ever says the ask's tool ran: the only result its call
		// ever gets is the synthetic "not run" one.
		for i, r := range reqs {
			n := 0
			for _, msg := range r.Messages {
				if msg.Role != "tool" || msg.ToolCallID != s.callID {
					continue
				}
				n++
				content, _ := msg.Content.(string)
				if !strings.HasPrefix(content, "not run") {
					t.Fatalf("request %d (last user %q) carries a real result for ask %s's call: %q", i, r.LastUserText(), s.name, content)
				}
			}
			if n > 1 {
				t.Fatalf("request %d carries %d results for call %s", i, n, s.callID)
			}
		}
		// Each follower reached the model exactly once, in order, as itself.
		i1, i2 := requestIndexes(m, s.followers[0]), requestIndexes(m, s.followers[1])
		if len(i1) != 1 || len(i2) != 1 || i1[0] > i2[0] {
			t.Fatalf("session %s followers reached the model at %v and %v, want once each, in order", s.name, i1, i2)
		}
		first := reqs[i1[0]]
		if !slices.Equal(first.UserTexts, []string{s.askText, s.followers[0]}) {
			t.Fatalf("first follower of %s sent user texts %q, want [ask, follower1]", s.name, first.UserTexts)
		}
		// The lost turn's call has its closing "not run" result in that
		// request, so the transcript is valid.
		found := false
		for _, msg := range first.Messages {
			content, _ := msg.Content.(string)
			found = found || msg.Role == "tool" && msg.ToolCallID == s.callID && strings.HasPrefix(content, "not run")
		}
		if !found {
			t.Fatalf("first follower of %s: call %s has no \"not run\" result in %+v", s.name, s.callID, first.Messages)
		}
		if got := m.RequestsWithLastUser(s.followers[1])[0].UserTexts; !slices.Equal(got, []string{s.askText, s.followers[0], s.followers[1]}) {
			t.Fatalf("second follower of %s sent user texts %q", s.name, got)
		}
		// Their replies are in the transcript.
		snap := resume(t, c, s.session)
		for i, f := range s.followers {
			found := false
			for _, msg := range snap.Messages {
				found = found || msg.Role == "assistant" && msg.Content == "ok: "+f && msg.AdmissionID == s.followRcpt[i].AdmissionID
			}
			if !found {
				t.Fatalf("session %s snapshot lacks the reply to %q: %+v", s.name, f, snap.Messages)
			}
		}
		if len(snap.Pending) != 0 || snap.Running != nil || len(snap.Prompts) != 0 {
			t.Fatalf("session %s not idle at the end: %+v", s.name, snap)
		}
	}
	// The destructive command never ran.
	wantIntact(t, victimFile)
}

// TestRestartGracefulStopDeliversSettleEventsBeforeClose checks what
// docs/protocol.md Part 2 A promises a client of a graceful stop: running
// turns are settled first and the connection is closed with 1001 after
// that, so a subscribed client sees every turn end (turn.completed
// interrupted, each once) and then a proper 1001 close. Eight sessions
// park on a clarification so that many settle events are in flight when
// the daemon closes its connections.
func TestRestartGracefulStopDeliversSettleEventsBeforeClose(t *testing.T) {
	const sessions = 8
	m := fixtures.NewFakeModel(t)
	m.Default(fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("clarify", `{"question":"Which one?","choices":["a","b"]}`)}})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m,
		"agent: {clarify_timeout: 600}\nlimits: {max_concurrent_turns: 8}")})
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	c := d.Dial(t)
	var ids, admissions []string
	for i := range sessions {
		s := createSession(t, c, map[string]any{})
		r := submit(t, c, s.SessionID, "park", "park on a question "+string(rune('a'+i)))
		waitPrompt(t, c, r.AdmissionID, "clarify")
		ids, admissions = append(ids, s.SessionID), append(admissions, r.AdmissionID)
	}
	if code := d.SIGTERM(t); code != 0 {
		t.Fatalf("SIGTERM exit code %d, want 0", code)
	}
	status := c.WaitClosed(t, wait)
	var missing []string
	for i, id := range ids {
		rows := fixtures.Admissions(t, db, id)
		wantRow(t, rows[0], "terminal", "interrupted")
		want := storedEventsAfter(t, db, id, 0)
		got := durableEvents(c.Events(), id)
		if len(got) != len(want) {
			missing = append(missing, fmt.Sprintf("session %d: got %s, store %v", i, describeEvents(got), want))
			continue
		}
		sameEvents(t, "session "+id, got, want)
		n := 0
		for _, e := range got {
			if e.Type == "turn.completed" && e.AdmissionID == admissions[i] {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("session %d: %d turn.completed events for the parked turn, want 1", i, n)
		}
	}
	if len(missing) > 0 || status != websocket.StatusGoingAway {
		t.Fatalf("graceful stop: close status %v (want 1001); %d of %d sessions lost settle events before the close:\n%s",
			status, len(missing), sessions, strings.Join(missing, "\n"))
	}
}
