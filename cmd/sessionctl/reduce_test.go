package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/protocol"
)

func rev(typ protocol.EventType, adm string, payload any) protocol.Event {
	b, ok := payload.(string)
	raw := json.RawMessage(b)
	if !ok {
		raw, _ = json.Marshal(payload)
	}
	return protocol.Event{SessionID: "ses_1", Type: typ, AdmissionID: adm, Payload: raw}
}

func withGen(e protocol.Event, g int64) protocol.Event { e.ExecutionGeneration = &g; return e }

func outcomeP(o protocol.Outcome) *protocol.Outcome { return &o }

// reduce, table-tested: a start view, events in order, the view after them
// and the changes they reported.
func TestReduce(t *testing.T) {
	owner := &protocol.Sender{ID: "owner"}
	queued := func(id string, seq int64) protocol.Receipt {
		return protocol.Receipt{AdmissionID: id, SessionID: "ses_1", InputID: "in_" + id, Seq: seq, Status: protocol.StatusQueued}
	}
	terminal := func(r protocol.Receipt, o protocol.Outcome) protocol.Receipt {
		r.Status, r.Outcome = protocol.StatusTerminal, outcomeP(o)
		return r
	}
	approval := protocol.Prompt{PromptID: "p1", Kind: protocol.KindApproval, AdmissionID: "a1", Payload: json.RawMessage(`{"tool_call_id":"c1","command":"rm -r x"}`)}
	clarify := protocol.Prompt{PromptID: "p2", Kind: protocol.KindClarify, AdmissionID: "a1", Payload: json.RawMessage(`{"tool_call_id":"c2","questions":[{"id":"q","question":"?"}]}`)}
	zero := 0
	cases := []struct {
		name    string
		start   sessionView
		events  []protocol.Event
		want    sessionView
		changes []change
	}{{
		name:    "admissions queue in seq order, with their senders",
		events:  []protocol.Event{rev(protocol.EventAdmissionUpdated, "a2", queued("a2", 2)), rev(protocol.EventAdmissionUpdated, "a1", func() protocol.Receipt { r := queued("a1", 1); r.Sender = owner; return r }())},
		want:    sessionView{pending: []protocol.Receipt{func() protocol.Receipt { r := queued("a1", 1); r.Sender = owner; return r }(), queued("a2", 2)}, seen: map[string]bool{"a1": true, "a2": true}, senders: map[string]*protocol.Sender{"a1": owner}},
		changes: []change{admissionChanged{queued("a2", 2)}, admissionChanged{func() protocol.Receipt { r := queued("a1", 1); r.Sender = owner; return r }()}},
	}, {
		name:    "an update keeps the text the pending row had; cancelled leaves the queue",
		start:   sessionView{pending: []protocol.Receipt{func() protocol.Receipt { r := queued("a1", 1); r.Text = "hello"; return r }(), queued("a2", 2)}},
		events:  []protocol.Event{rev(protocol.EventAdmissionUpdated, "a1", protocol.Receipt{AdmissionID: "a1", Seq: 1, Status: protocol.StatusQueued, Reason: protocol.WaitBusy}), rev(protocol.EventAdmissionUpdated, "a2", terminal(queued("a2", 2), protocol.OutcomeCancelled))},
		want:    sessionView{pending: []protocol.Receipt{{AdmissionID: "a1", Seq: 1, Status: protocol.StatusQueued, Reason: protocol.WaitBusy, Text: "hello"}}, seen: map[string]bool{"a1": true, "a2": true}},
		changes: []change{admissionChanged{protocol.Receipt{AdmissionID: "a1", Seq: 1, Status: protocol.StatusQueued, Reason: protocol.WaitBusy}}, admissionChanged{terminal(queued("a2", 2), protocol.OutcomeCancelled)}, inputCancelled{terminal(queued("a2", 2), protocol.OutcomeCancelled)}},
	}, {
		name:    "an unknown admission stays pending and is told",
		events:  []protocol.Event{rev(protocol.EventAdmissionUpdated, "a1", protocol.Receipt{AdmissionID: "a1", Seq: 1, Status: protocol.StatusUnknown})},
		want:    sessionView{pending: []protocol.Receipt{{AdmissionID: "a1", Seq: 1, Status: protocol.StatusUnknown}}, seen: map[string]bool{"a1": true}},
		changes: []change{admissionChanged{protocol.Receipt{AdmissionID: "a1", Seq: 1, Status: protocol.StatusUnknown}}, inputUnknown{protocol.Receipt{AdmissionID: "a1", Seq: 1, Status: protocol.StatusUnknown}}},
	}, {
		name:    "a turn starts: running with its generation, sender from the receipt, stream and tools reset",
		start:   sessionView{senders: map[string]*protocol.Sender{"a1": owner}, stream: "old", streamAdm: "a0", tools: []toolView{{id: "c0"}}},
		events:  []protocol.Event{withGen(rev(protocol.EventTurnStarted, "a1", protocol.TurnStartedPayload{InputID: "i", Text: "hi"}), 4)},
		want:    sessionView{senders: map[string]*protocol.Sender{"a1": owner}, running: "a1", runningGen: 4, streamAdm: "a1"},
		changes: []change{turnStarted{Text: "hi", Sender: owner}},
	}, {
		name:    "deltas stream per admission; message.completed ends the stream and names the calls",
		events:  []protocol.Event{rev(protocol.EventMessageDelta, "a1", protocol.MessageDeltaPayload{Text: "he"}), rev(protocol.EventMessageDelta, "a1", protocol.MessageDeltaPayload{Text: "llo"}), rev(protocol.EventMessageDelta, "a2", protocol.MessageDeltaPayload{Text: "x"}), rev(protocol.EventMessageCompleted, "a2", protocol.MessageCompletedPayload{Message: protocol.Message{ID: 7, Role: protocol.RoleAssistant, Content: "done", AdmissionID: "a2", ToolCalls: json.RawMessage(`[{"id":"c1","name":"terminal","arguments":"{}"}]`)}})},
		want:    sessionView{streamAdm: "a2", callNames: map[string]string{"c1": "terminal"}},
		changes: []change{assistantSaid{"done"}},
	}, {
		name:    "a steer's user message taken into the running turn is told, with its sender",
		start:   sessionView{senders: map[string]*protocol.Sender{"s1": owner}},
		events:  []protocol.Event{rev(protocol.EventMessageCompleted, "s1", protocol.MessageCompletedPayload{Message: protocol.Message{ID: 8, Role: protocol.RoleUser, Content: "also the tests", AdmissionID: "s1"}})},
		want:    sessionView{senders: map[string]*protocol.Sender{"s1": owner}},
		changes: []change{inputSteered{Text: "also the tests", Sender: owner}},
	}, {
		name:    "a tool call runs, its output is kept, its end reports the result line",
		events:  []protocol.Event{rev(protocol.EventToolStarted, "a1", protocol.ToolStartedPayload{ToolCallID: "c1", Name: "terminal", Args: json.RawMessage(`{"command":"ls"}`)}), rev(protocol.EventToolOutput, "a1", protocol.ToolOutputPayload{ToolCallID: "c1", Text: "a\n"}), rev(protocol.EventToolOutput, "a1", protocol.ToolOutputPayload{ToolCallID: "c9", Text: "lost"})},
		want:    sessionView{tools: []toolView{{id: "c1", name: "terminal", summary: "$ ls", out: "a\n"}}},
		changes: []change{toolStarted{Name: "terminal", Summary: "$ ls"}},
	}, {
		name:    "tool.completed removes the call; its result's output, else what was seen live",
		start:   sessionView{tools: []toolView{{id: "c1", name: "terminal", out: "partial\n"}, {id: "c2", name: "terminal", out: "b"}}},
		events:  []protocol.Event{rev(protocol.EventToolCompleted, "a1", protocol.ToolCompletedPayload{ToolCallID: "c1", Name: "terminal", OK: false, Result: json.RawMessage(`{"error":"not run: the user denied this command"}`)}), rev(protocol.EventToolCompleted, "a1", protocol.ToolCompletedPayload{ToolCallID: "c2", Name: "terminal", OK: true, ExitCode: &zero, Result: json.RawMessage(`{"exit_code":0,"output":"b\n","truncated":false,"total_bytes":2,"duration_ms":5}`)})},
		want:    sessionView{tools: []toolView{}},
		changes: []change{toolEnded{OK: false, Line: "✗ not run: the user denied this command", Output: "partial\n"}, toolEnded{OK: true, Line: "exit 0 · 5 ms", Output: "b\n"}},
	}, {
		name:    "prompts open once each and close with their kind",
		events:  []protocol.Event{rev(protocol.EventPromptOpened, "a1", protocol.PromptOpenedPayload{Prompt: approval}), rev(protocol.EventPromptOpened, "a1", protocol.PromptOpenedPayload{Prompt: approval}), rev(protocol.EventPromptOpened, "a1", protocol.PromptOpenedPayload{Prompt: clarify}), rev(protocol.EventPromptClosed, "a1", protocol.PromptClosedPayload{PromptID: "p1", Resolution: protocol.ResolutionAnswered, Response: json.RawMessage(`{"choice":"once"}`)}), rev(protocol.EventPromptClosed, "a1", protocol.PromptClosedPayload{PromptID: "p9", Resolution: protocol.ResolutionFenced})},
		want:    sessionView{prompts: []protocol.Prompt{clarify}},
		changes: []change{promptOpened{Prompt: approval, Admission: "a1"}, promptOpened{Prompt: clarify, Admission: "a1"}, promptClosed{Kind: "approval", Closed: protocol.PromptClosedPayload{PromptID: "p1", Resolution: protocol.ResolutionAnswered, Response: json.RawMessage(`{"choice":"once"}`)}}, promptClosed{Kind: "prompt", Closed: protocol.PromptClosedPayload{PromptID: "p9", Resolution: protocol.ResolutionFenced}}},
	}, {
		name:    "turn.completed cuts the stream off, clears tools and the running turn",
		start:   sessionView{running: "a1", runningGen: 3, stream: "half", streamAdm: "a1", tools: []toolView{{id: "c1"}}},
		events:  []protocol.Event{rev(protocol.EventTurnCompleted, "a1", protocol.TurnCompletedPayload{Outcome: protocol.OutcomeInterrupted, Error: "interrupted"})},
		want:    sessionView{streamAdm: "a1"},
		changes: []change{turnEnded{Outcome: protocol.OutcomeInterrupted, Error: "interrupted", CutStream: "half"}},
	}, {
		name:  "send follows its admission: receipts, replies, the turn's end with a terminal receipt",
		start: sessionView{follow: "a1", receipt: &protocol.Receipt{AdmissionID: "a1", InputID: "i1", Seq: 1, Status: protocol.StatusQueued}},
		events: []protocol.Event{
			withGen(rev(protocol.EventAdmissionUpdated, "a1", protocol.Receipt{AdmissionID: "a1", InputID: "i1", Seq: 1, Status: protocol.StatusStarted}), 2),
			rev(protocol.EventMessageCompleted, "a2", protocol.MessageCompletedPayload{Message: protocol.Message{ID: 5, Role: protocol.RoleAssistant, Content: "other", AdmissionID: "a2"}}),
			rev(protocol.EventMessageCompleted, "a1", protocol.MessageCompletedPayload{Message: protocol.Message{ID: 6, Role: protocol.RoleAssistant, Content: "mine", AdmissionID: "a1"}}),
			rev(protocol.EventTurnCompleted, "a1", protocol.TurnCompletedPayload{Outcome: protocol.OutcomeFailed, Error: "model down"}),
		},
		want: sessionView{follow: "a1", pending: []protocol.Receipt{{AdmissionID: "a1", InputID: "i1", Seq: 1, Status: protocol.StatusStarted}}, seen: map[string]bool{"a1": true},
			receipt: &protocol.Receipt{AdmissionID: "a1", SessionID: "ses_1", InputID: "i1", Seq: 1, Status: protocol.StatusTerminal, Outcome: outcomeP(protocol.OutcomeFailed), Error: "model down"},
			replies: map[int64]protocol.Message{6: {ID: 6, Role: protocol.RoleAssistant, Content: "mine", AdmissionID: "a1"}}, turnError: "model down", finished: true},
		changes: []change{admissionChanged{protocol.Receipt{AdmissionID: "a1", InputID: "i1", Seq: 1, Status: protocol.StatusStarted}}, assistantSaid{"other"}, assistantSaid{"mine"}, turnEnded{Outcome: protocol.OutcomeFailed, Error: "model down"}},
	}, {
		name:    "a terminal receipt of the followed admission is kept",
		start:   sessionView{follow: "a1", receipt: &protocol.Receipt{AdmissionID: "a1", Status: protocol.StatusTerminal, Outcome: outcomeP(protocol.OutcomeCompleted)}, finished: true},
		events:  []protocol.Event{rev(protocol.EventAdmissionUpdated, "a1", protocol.Receipt{AdmissionID: "a1", Status: protocol.StatusStarted})},
		want:    sessionView{follow: "a1", receipt: &protocol.Receipt{AdmissionID: "a1", Status: protocol.StatusTerminal, Outcome: outcomeP(protocol.OutcomeCompleted)}, finished: true, pending: []protocol.Receipt{{AdmissionID: "a1", Status: protocol.StatusStarted}}, seen: map[string]bool{"a1": true}},
		changes: []change{admissionChanged{protocol.Receipt{AdmissionID: "a1", Status: protocol.StatusStarted}}},
	}, {
		name:   "an unknown followed admission finishes the wait",
		start:  sessionView{follow: "a1"},
		events: []protocol.Event{rev(protocol.EventAdmissionUpdated, "a1", protocol.Receipt{AdmissionID: "a1", Status: protocol.StatusUnknown})},
		want: sessionView{follow: "a1", receipt: &protocol.Receipt{AdmissionID: "a1", Status: protocol.StatusUnknown}, finished: true,
			pending: []protocol.Receipt{{AdmissionID: "a1", Status: protocol.StatusUnknown}}, seen: map[string]bool{"a1": true}},
		changes: []change{admissionChanged{protocol.Receipt{AdmissionID: "a1", Status: protocol.StatusUnknown}}, inputUnknown{protocol.Receipt{AdmissionID: "a1", Status: protocol.StatusUnknown}}},
	}, {
		name:   "tool.running and a newer daemon's event types change nothing",
		start:  sessionView{running: "a1"},
		events: []protocol.Event{rev(protocol.EventToolRunning, "a1", protocol.ToolRunningPayload{ToolCallID: "c1", PID: 9}), rev("mcp.future", "", `{"name":"fs","status":"ready"}`)},
		want:   sessionView{running: "a1"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := c.start
			var got []change
			for _, ev := range c.events {
				var ch []change
				v, ch = reduce(v, ev)
				got = append(got, ch...)
			}
			if !reflect.DeepEqual(normal(v), normal(c.want)) {
				t.Errorf("view\n got %+v\nwant %+v", v, c.want)
			}
			if !reflect.DeepEqual(got, c.changes) {
				t.Errorf("changes\n got %#v\nwant %#v", got, c.changes)
			}
		})
	}
}

// normal makes empty and nil slices and maps compare equal.
func normal(v sessionView) sessionView {
	if len(v.tools) == 0 {
		v.tools = nil
	}
	if len(v.pending) == 0 {
		v.pending = nil
	}
	if len(v.prompts) == 0 {
		v.prompts = nil
	}
	return v
}

// A payload that does not decode changes nothing and is reported with the
// event type and the field; the events after it still apply.
func TestReduceUndecodablePayload(t *testing.T) {
	v, ch := reduce(sessionView{running: "a1"}, rev(protocol.EventTurnCompleted, "a1", `{"outcome":3}`))
	if v.running != "a1" || len(ch) != 1 {
		t.Fatalf("view %+v changes %#v", v, ch)
	}
	u, ok := ch[0].(undecodable)
	if !ok || !strings.Contains(u.Err.Error(), "turn.completed") || !strings.Contains(u.Err.Error(), `"outcome"`) {
		t.Fatalf("change %#v", ch[0])
	}
	v, _ = reduce(v, rev(protocol.EventTurnCompleted, "a1", protocol.TurnCompletedPayload{Outcome: protocol.OutcomeCompleted}))
	if v.running != "" {
		t.Fatalf("the next event did not apply: %+v", v)
	}
}

// reduce never changes the view it is given: every case's events applied
// to a view full of shared slices and maps leave a deep copy of it equal.
func TestReduceIsPure(t *testing.T) {
	start := func() sessionView {
		return sessionView{running: "a1", runningGen: 1,
			pending: []protocol.Receipt{{AdmissionID: "a1", Seq: 1, Status: protocol.StatusStarted, Text: "t"}, {AdmissionID: "a3", Seq: 3, Status: protocol.StatusQueued}},
			seen:    map[string]bool{"a1": true, "a3": true},
			senders: map[string]*protocol.Sender{"a1": {ID: "owner"}},
			stream:  "s", streamAdm: "a1",
			tools:     []toolView{{id: "c1", name: "terminal", out: "x"}, {id: "c2", name: "terminal"}},
			prompts:   []protocol.Prompt{{PromptID: "p1", Kind: protocol.KindApproval}, {PromptID: "p2", Kind: protocol.KindClarify}},
			callNames: map[string]string{"c1": "terminal"},
			follow:    "a1", receipt: &protocol.Receipt{AdmissionID: "a1", Status: protocol.StatusStarted},
			replies: map[int64]protocol.Message{1: {ID: 1}},
		}
	}
	events := []protocol.Event{
		rev(protocol.EventAdmissionUpdated, "a2", protocol.Receipt{AdmissionID: "a2", Seq: 2, Status: protocol.StatusQueued, Sender: &protocol.Sender{ID: "x"}}),
		rev(protocol.EventAdmissionUpdated, "a1", protocol.Receipt{AdmissionID: "a1", Seq: 1, Status: protocol.StatusStarted}),
		rev(protocol.EventAdmissionUpdated, "a3", protocol.Receipt{AdmissionID: "a3", Seq: 3, Status: protocol.StatusTerminal, Outcome: outcomeP(protocol.OutcomeCancelled)}),
		rev(protocol.EventTurnStarted, "a1", protocol.TurnStartedPayload{Text: "t"}),
		rev(protocol.EventMessageDelta, "a1", protocol.MessageDeltaPayload{Text: "more"}),
		rev(protocol.EventMessageCompleted, "a1", protocol.MessageCompletedPayload{Message: protocol.Message{ID: 2, Role: protocol.RoleAssistant, AdmissionID: "a1", ToolCalls: json.RawMessage(`[{"id":"c3","name":"clarify"}]`)}}),
		rev(protocol.EventToolStarted, "a1", protocol.ToolStartedPayload{ToolCallID: "c3", Name: "clarify"}),
		rev(protocol.EventToolOutput, "a1", protocol.ToolOutputPayload{ToolCallID: "c1", Text: "y"}),
		rev(protocol.EventToolCompleted, "a1", protocol.ToolCompletedPayload{ToolCallID: "c1", Name: "terminal"}),
		rev(protocol.EventPromptOpened, "a1", protocol.PromptOpenedPayload{Prompt: protocol.Prompt{PromptID: "p3", Kind: protocol.KindClarify}}),
		rev(protocol.EventPromptClosed, "a1", protocol.PromptClosedPayload{PromptID: "p1", Resolution: protocol.ResolutionTimedOut}),
		rev(protocol.EventTurnCompleted, "a1", protocol.TurnCompletedPayload{Outcome: protocol.OutcomeCompleted}),
	}
	for _, ev := range events {
		v := start()
		before := start()
		next, _ := reduce(v, ev)
		if !reflect.DeepEqual(v, before) {
			t.Errorf("%s changed the view it was given:\n got %+v\nwant %+v", ev.Type, v, before)
		}
		if reflect.DeepEqual(next, before) {
			t.Errorf("%s changed nothing", ev.Type)
		}
	}
}

// A submit's receipt is taken unless an event told of the admission first
// or it is terminal; a snapshot replaces pending, running and prompts, and
// forgets the stream and the tools.
func TestViewAdmittedAndAdopt(t *testing.T) {
	r := protocol.Receipt{AdmissionID: "a1", Seq: 1, Status: protocol.StatusQueued}
	cases := []struct {
		name  string
		start sessionView
		r     protocol.Receipt
		want  []protocol.Receipt
	}{
		{"new", sessionView{}, r, []protocol.Receipt{r}},
		{"seen by an event first", sessionView{seen: map[string]bool{"a1": true}}, r, nil},
		{"terminal already", sessionView{}, protocol.Receipt{AdmissionID: "a1", Status: protocol.StatusTerminal}, nil},
	}
	for _, c := range cases {
		if got := c.start.admitted(c.r).pending; !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: pending %+v, want %+v", c.name, got, c.want)
		}
	}
	running := "a2"
	v := sessionView{pending: []protocol.Receipt{r}, stream: "s", tools: []toolView{{id: "c"}}, prompts: []protocol.Prompt{{PromptID: "p0"}}}.adopt(protocol.Snapshot{
		Running: &running, ExecutionGeneration: 5,
		Pending: []protocol.Receipt{{AdmissionID: "a3", Seq: 3}, {AdmissionID: "a2", Seq: 2}},
		Prompts: []protocol.Prompt{{PromptID: "p1"}}})
	want := sessionView{running: "a2", runningGen: 5, pending: []protocol.Receipt{{AdmissionID: "a2", Seq: 2}, {AdmissionID: "a3", Seq: 3}},
		seen: map[string]bool{"a2": true, "a3": true}, prompts: []protocol.Prompt{{PromptID: "p1"}}}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("adopt:\n got %+v\nwant %+v", v, want)
	}
}
