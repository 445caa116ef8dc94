package main

import (
	"maps"
	"slices"
	"strings"

	"github.com/sessiond/sessiond/protocol"
)

// The one reader of the event stream that `sessionctl attach` (tui.go) and
// `sessionctl send` (send.go) share: reduce folds a session.event into a
// sessionView and says what changed; each command renders the changes its
// own way (attach to the scrollback, send to stderr and its exit status).

// sessionView is what a client knows of a session from its snapshot and
// its events. It is a value: reduce and the with/adopt methods return a new
// one and never change the one they were given (a slice or map is copied
// before it changes), so a view can be kept and compared.
type sessionView struct {
	running    string             // admission id of the running turn; "" when idle
	runningGen int64              // its execution generation (0 when not known)
	pending    []protocol.Receipt // non-terminal admissions, in seq order
	// seen holds the admissions a receipt or admission.updated was seen
	// of; senders who submitted them (admission.updated's sender).
	seen    map[string]bool
	senders map[string]*protocol.Sender
	// stream is the assistant text streaming (message.delta) for streamAdm,
	// "" between messages.
	stream, streamAdm string
	tools             []toolView        // tool calls in progress, in start order
	prompts           []protocol.Prompt // open prompts, in open order
	callNames         map[string]string // tool_call_id -> tool name, from assistant messages
	// mcp is the session's MCP servers and their state (snapshot's
	// mcp_servers, then mcp.status events), in the snapshot's order.
	mcp []protocol.MCPServerStatus

	// follow is the admission `send` waits for ("" in attach); the members
	// below are about it.
	follow string
	// host is the turn the followed steer was taken into (its
	// steered_into): send's reply is that turn's answer.
	host      string
	receipt   *protocol.Receipt          // its latest receipt, kept once terminal
	replies   map[int64]protocol.Message // its assistant messages, by message id
	turnError string                     // its turn.completed error
	finished  bool                       // it settled: terminal, or unknown after a crash
}

// toolView is a tool call in progress: out is its output so far
// (tool.output), its last 8-16 KiB.
type toolView struct {
	id, name, summary, out string
}

// maxToolTail bounds toolView.Out; it is cut to keepToolTail when it
// grows past it.
const maxToolTail, keepToolTail = 16 << 10, 8 << 10

// change is what one event changed, for the commands to render.
type change interface{ isChange() }

type (
	// admissionChanged: every admission.updated, with its receipt.
	admissionChanged struct{ Receipt protocol.Receipt }
	// inputCancelled: an admission settled cancelled (before it ran).
	inputCancelled struct{ Receipt protocol.Receipt }
	// inputUnknown: an admission is unknown (its daemon died while it ran).
	inputUnknown struct{ Receipt protocol.Receipt }
	// turnStarted: the input Text, submitted by Sender (nil: not known).
	turnStarted struct {
		Text   string
		Sender *protocol.Sender
	}
	// assistantSaid: an assistant message with content (not only tool calls).
	assistantSaid struct{ Content string }
	// inputSteered: the user message of a steer taken into the running
	// turn (prompt.submit when_busy steer), submitted by Sender.
	inputSteered struct {
		Text   string
		Sender *protocol.Sender
	}
	// toolStarted: a tool call began; Summary is toolSummary's line.
	toolStarted struct{ Name, Summary string }
	// toolEnded: a tool call ended; Line is resultSummary's line and
	// Output its output (what was seen live when the result has none).
	toolEnded struct {
		OK           bool
		Line, Output string
	}
	// promptOpened: a prompt of admission Admission opened (once per prompt).
	promptOpened struct {
		Prompt    protocol.Prompt
		Admission string
	}
	// promptClosed: a prompt closed; Kind is its kind when it was open
	// here, else "prompt".
	promptClosed struct {
		Kind   string
		Closed protocol.PromptClosedPayload
	}
	// turnEnded: a turn settled; CutStream is the text that was still
	// streaming for it ("" when none).
	turnEnded struct {
		Outcome   protocol.Outcome
		Error     string
		CutStream string
	}
	// undecodable: an event whose payload did not decode (it changed
	// nothing); Err names the type and the field.
	undecodable struct{ Err error }
	// mcpChanged: an MCP server's status changed (mcp.status whose status
	// or error differs from what the view held).
	mcpChanged struct{ Status protocol.MCPServerStatus }
)

func (admissionChanged) isChange() {}
func (inputCancelled) isChange()   {}
func (inputUnknown) isChange()     {}
func (turnStarted) isChange()      {}
func (assistantSaid) isChange()    {}
func (inputSteered) isChange()     {}
func (toolStarted) isChange()      {}
func (toolEnded) isChange()        {}
func (promptOpened) isChange()     {}
func (promptClosed) isChange()     {}
func (turnEnded) isChange()        {}
func (undecodable) isChange()      {}
func (mcpChanged) isChange()       {}

// reduce folds one event into v. Events of a type this build does not know
// change nothing; one whose payload does not decode changes nothing and is
// reported as undecodable. Deduplication by seq is the caller's (it knows
// the connection's last seq).
func reduce(v sessionView, ev protocol.Event) (sessionView, []change) {
	pl, err := ev.Decode()
	if err != nil {
		return v, []change{undecodable{err}}
	}
	followed := v.follow != "" && ev.AdmissionID == v.follow
	var out []change
	switch p := pl.(type) {
	case protocol.Receipt:
		v.seen = with(v.seen, p.AdmissionID, true)
		if p.Sender != nil {
			v.senders = with(v.senders, p.AdmissionID, p.Sender)
		}
		out = append(out, admissionChanged{p})
		switch p.Status {
		case protocol.StatusTerminal:
			v.pending = removeReceipt(v.pending, p.AdmissionID)
			if p.Outcome != nil && *p.Outcome == protocol.OutcomeCancelled {
				out = append(out, inputCancelled{p})
			}
		case protocol.StatusUnknown:
			v.pending = upsertReceipt(v.pending, p)
			out = append(out, inputUnknown{p})
		default:
			v.pending = upsertReceipt(v.pending, p)
		}
		if followed {
			v = v.withReceipt(p)
		}
	case protocol.TurnStartedPayload:
		sender := p.Sender
		if sender == nil {
			sender = v.senders[ev.AdmissionID]
		}
		v.running, v.runningGen = ev.AdmissionID, 0
		if ev.ExecutionGeneration != nil {
			v.runningGen = *ev.ExecutionGeneration
		}
		v.stream, v.streamAdm, v.tools = "", ev.AdmissionID, nil
		out = append(out, turnStarted{Text: p.Text, Sender: sender})
	case protocol.MessageDeltaPayload:
		if ev.AdmissionID != v.streamAdm {
			v.stream, v.streamAdm = "", ev.AdmissionID
		}
		v.stream += p.Text
	case protocol.MessageCompletedPayload:
		v.stream = ""
		if p.Message.Role == protocol.RoleUser {
			// Only steers: a turn's own input comes with turn.started.
			sender := p.Message.Sender
			if sender == nil {
				sender = v.senders[ev.AdmissionID]
			}
			out = append(out, inputSteered{Text: p.Message.Content, Sender: sender})
		}
		if p.Message.Role == protocol.RoleAssistant {
			v.callNames = withCalls(v.callNames, p.Message.ToolCalls)
			if strings.TrimSpace(p.Message.Content) != "" {
				out = append(out, assistantSaid{p.Message.Content})
			}
		}
		if followed || (v.host != "" && ev.AdmissionID == v.host) {
			v = v.withMessage(p.Message)
		}
	case protocol.ToolStartedPayload:
		tv := toolView{id: p.ToolCallID, name: p.Name, summary: toolSummary(p.Name, p.Args)}
		v.tools = append(slices.Clip(v.tools), tv)
		out = append(out, toolStarted{Name: p.Name, Summary: tv.summary})
	case protocol.ToolOutputPayload:
		v.tools = slices.Clone(v.tools)
		for i := range v.tools {
			if v.tools[i].id == p.ToolCallID {
				o := v.tools[i].out + p.Text
				if len(o) > maxToolTail {
					o = o[len(o)-keepToolTail:]
				}
				v.tools[i].out = o
			}
		}
	case protocol.ToolCompletedPayload:
		live := ""
		if i := slices.IndexFunc(v.tools, func(t toolView) bool { return t.id == p.ToolCallID }); i >= 0 {
			live = v.tools[i].out
			v.tools = slices.Delete(slices.Clone(v.tools), i, i+1)
		}
		line, output := resultSummary(p.Name, p.OK, p.ExitCode, p.Result)
		if output == "" {
			output = live // e.g. interrupted: the output seen live stays on screen
		}
		out = append(out, toolEnded{OK: p.OK, Line: line, Output: output})
	case protocol.PromptOpenedPayload:
		if slices.ContainsFunc(v.prompts, func(q protocol.Prompt) bool { return q.PromptID == p.Prompt.PromptID }) {
			break
		}
		v.prompts = append(slices.Clip(v.prompts), p.Prompt)
		out = append(out, promptOpened{Prompt: p.Prompt, Admission: ev.AdmissionID})
	case protocol.PromptClosedPayload:
		kind := "prompt"
		if i := slices.IndexFunc(v.prompts, func(q protocol.Prompt) bool { return q.PromptID == p.PromptID }); i >= 0 {
			kind = string(v.prompts[i].Kind)
			v.prompts = slices.Delete(slices.Clone(v.prompts), i, i+1)
		}
		out = append(out, promptClosed{Kind: kind, Closed: p})
	case protocol.TurnCompletedPayload:
		cut := ""
		if v.stream != "" && ev.AdmissionID == v.streamAdm {
			cut = v.stream
		}
		v.stream, v.tools = "", nil
		if v.running == ev.AdmissionID {
			v.running, v.runningGen = "", 0
		}
		out = append(out, turnEnded{Outcome: p.Outcome, Error: p.Error, CutStream: cut})
		if followed {
			v.turnError = p.Error
			if v.receipt == nil || v.receipt.Status != protocol.StatusTerminal {
				outcome := p.Outcome
				r := protocol.Receipt{AdmissionID: v.follow, SessionID: ev.SessionID, Status: protocol.StatusTerminal, Outcome: &outcome, Error: p.Error}
				if v.receipt != nil {
					r.InputID, r.Seq, r.ExecutionGeneration, r.Duplicate = v.receipt.InputID, v.receipt.Seq, v.receipt.ExecutionGeneration, v.receipt.Duplicate
				}
				v.receipt = &r
			}
			v.finished = true
		}
	case protocol.MCPServerStatus:
		i := slices.IndexFunc(v.mcp, func(x protocol.MCPServerStatus) bool { return x.Name == p.Name })
		if i >= 0 && v.mcp[i].Status == p.Status && v.mcp[i].Error == p.Error && slices.Equal(v.mcp[i].Tools, p.Tools) {
			break
		}
		v.mcp = slices.Clone(v.mcp)
		if i >= 0 {
			v.mcp[i] = p
		} else {
			v.mcp = append(v.mcp, p)
		}
		out = append(out, mcpChanged{p})
	case protocol.ToolRunningPayload, protocol.UnknownPayload:
		// Nothing to show: tool.running is the daemon's crash bookkeeping,
		// and a newer daemon's event types are skipped.
	}
	return v, out
}

// withReceipt records a receipt of the followed admission (from
// prompt.submit or admission.updated): a terminal receipt is never
// replaced, and a terminal or unknown one finishes the wait.
func (v sessionView) withReceipt(r protocol.Receipt) sessionView {
	if v.receipt != nil && v.receipt.Status == protocol.StatusTerminal {
		return v
	}
	v.receipt = &r
	if r.SteeredInto != "" {
		v.host = r.SteeredInto
	}
	if r.Status == protocol.StatusTerminal || r.Status == protocol.StatusUnknown {
		v.finished = true
	}
	return v
}

// withMessage keeps m when it is an assistant message of the followed
// admission (send's reply is the last one with content).
func (v sessionView) withMessage(m protocol.Message) sessionView {
	if v.follow != "" && (m.AdmissionID == v.follow || (v.host != "" && m.AdmissionID == v.host)) && m.Role == protocol.RoleAssistant {
		v.replies = with(v.replies, m.ID, m)
	}
	return v
}

// admitted records the receipt prompt.submit returned, unless an event
// already told of that admission (or it is terminal already).
func (v sessionView) admitted(r protocol.Receipt) sessionView {
	if v.seen[r.AdmissionID] || r.Status == protocol.StatusTerminal {
		return v
	}
	v.seen = with(v.seen, r.AdmissionID, true)
	v.pending = upsertReceipt(v.pending, r)
	return v
}

// adopt takes the authoritative state of a snapshot: its pending
// admissions, running turn and open prompts; nothing streams and no tool
// runs as far as the view knows until the next events.
func (v sessionView) adopt(snap protocol.Snapshot) sessionView {
	v.pending = nil
	for _, r := range snap.Pending {
		v.seen = with(v.seen, r.AdmissionID, true)
		v.pending = upsertReceipt(v.pending, r)
	}
	v.running, v.runningGen = "", 0
	if snap.Running != nil {
		v.running, v.runningGen = *snap.Running, snap.ExecutionGeneration
	}
	v.prompts = slices.Clone(snap.Prompts)
	v.stream, v.tools = "", nil
	v.mcp = slices.Clone(snap.MCPServers)
	return v
}

// with returns a copy of m with k set to x.
func with[K comparable, V any](m map[K]V, k K, x V) map[K]V {
	n := make(map[K]V, len(m)+1)
	maps.Copy(n, m)
	n[k] = x
	return n
}

// withCalls returns names with the tool calls of raw (a message's
// tool_calls) added, names itself when there are none.
func withCalls(names map[string]string, raw []byte) map[string]string {
	calls := parseCalls(raw)
	if len(calls) == 0 {
		return names
	}
	n := maps.Clone(names)
	if n == nil {
		n = map[string]string{}
	}
	for _, c := range calls {
		n[c.ID] = c.Name
	}
	return n
}

// upsertReceipt returns a copy of pending with r replacing the receipt of
// its admission (keeping its text when r has none), or inserted in seq
// order.
func upsertReceipt(pending []protocol.Receipt, r protocol.Receipt) []protocol.Receipt {
	out := slices.Clone(pending)
	for i := range out {
		if out[i].AdmissionID == r.AdmissionID {
			if r.Text == "" {
				r.Text = out[i].Text
			}
			out[i] = r
			return out
		}
	}
	at := len(out)
	for i := range out {
		if out[i].Seq > r.Seq {
			at = i
			break
		}
	}
	return slices.Insert(out, at, r)
}

// removeReceipt returns pending without the receipt of admission id.
func removeReceipt(pending []protocol.Receipt, id string) []protocol.Receipt {
	i := slices.IndexFunc(pending, func(r protocol.Receipt) bool { return r.AdmissionID == id })
	if i < 0 {
		return pending
	}
	return slices.Delete(slices.Clone(pending), i, i+1)
}
