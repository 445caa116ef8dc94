package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sessiond/sessiond/model"
	"github.com/sessiond/sessiond/prompts"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/sandbox"
	"github.com/sessiond/sessiond/tools"
	"github.com/sessiond/sessiond/tools/mcp"
)

// MCP is a session's MCP servers as a turn uses them (tools/mcp.Set).
type MCP interface {
	// Wait returns once no server is still starting.
	Wait(ctx context.Context)
	// Tools are the ready servers' tools.
	Tools() []mcp.Tool
	// Tool is the tool of a ready server.
	Tool(server, tool string) (mcp.Tool, bool)
	// Server is a server's frozen configuration.
	Server(name string) (mcp.Server, bool)
	// Notes say which servers' tools are withdrawn, for the model.
	Notes() []string
	// Call sends tools/call (see tools/mcp.Set.Call).
	Call(ctx context.Context, server, tool string, args json.RawMessage, opt mcp.CallOptions) (*sdk.CallToolResult, error)
}

// InterruptedWhileCalling is the result of an MCP call that was in flight
// when the turn was stopped.
const InterruptedWhileCalling = "interrupted while running: the MCP call was cancelled (notifications/cancelled) when the turn was stopped; its effects are unknown"

// mcpDefs are the model-facing definitions of the session's MCP tools.
func mcpDefs(m MCP) []model.Tool {
	if m == nil {
		return nil
	}
	var out []model.Tool
	for _, t := range m.Tools() {
		desc := t.Description
		if desc == "" {
			desc = "Tool " + t.Name + " of the MCP server " + t.Server + "."
		}
		out = append(out, model.Tool{Name: t.FullName, Description: desc, Parameters: t.InputSchema})
	}
	return out
}

// withMCPNotes appends to the system message what the model must know of
// the session's MCP servers whose tools are withdrawn.
func withMCPNotes(msgs []model.Message, m MCP) []model.Message {
	if m == nil || len(msgs) == 0 {
		return msgs
	}
	notes := m.Notes()
	if len(notes) == 0 {
		return msgs
	}
	msgs[0].Content += "\n\n" + strings.Join(notes, "\n")
	return msgs
}

// mcpCall runs the model's call c of an MCP tool: the tool must be offered
// now, its arguments valid against the server's schema, the call approved
// (Decide); tool.running is durable before the request is sent; an
// interrupt cancels it.
func (r *Runner) mcpCall(ctx context.Context, s Session, t Turn, ev *ToolEvent, c model.ToolCall, server, tool string) {
	if s.MCP == nil {
		errorResult(ev, "unknown tool %q: this session has no MCP servers", c.Name)
		return
	}
	cfg, ok := s.MCP.Server(server)
	if !ok {
		errorResult(ev, "unknown tool %q: this session has no MCP server %q", c.Name, server)
		return
	}
	mt, ok := s.MCP.Tool(server, tool)
	if !ok {
		errorResult(ev, "tool %q is not available now (MCP server %q is not ready or has no such tool); nothing was sent", c.Name, server)
		return
	}
	args := json.RawMessage(c.Arguments)
	if strings.TrimSpace(c.Arguments) == "" {
		args = json.RawMessage(`{}`)
	}
	if err := tools.ValidateArgs(mt.InputSchema, args); err != nil {
		errorResult(ev, "invalid arguments: %v; nothing was sent to the MCP server", err)
		return
	}
	in := DecisionInput{ApprovalMode: r.approvalMode(s), SandboxUnavailable: s.SandboxUnavailable,
		MCP: &MCPCall{Server: server, Tool: tool, Arguments: protocol.VisibleJSON(args), AutoApproved: mt.AutoApproved,
			Stdio: cfg.Transport() == "stdio", Network: cfg.Network, SessionGiven: cfg.Source != mcp.SourceConfig}}
	in.Sandbox = sandboxPolicyOf(s)
	if _, ok := r.gate(ctx, s, t, ev, c.ID, in, "call"); !ok {
		return
	}
	if ctx.Err() != nil {
		return
	}
	ev.MCPServer = server
	res, err := s.MCP.Call(ctx, server, tool, args, mcp.CallOptions{
		Timeout: r.Config.MCPCallTimeout,
		// Sent only once tool.running is durable: after a crash a call
		// without it was never sent, one with it is reported "was running"
		// when the operator resolves the turn, and never sent again.
		BeforeSend: func() error {
			if err := r.Journal.ToolRunning(ctx, t, *ev, tools.ProcessIdentity{}); err != nil {
				return fmt.Errorf("its start could not be recorded: %w", err)
			}
			ev.Ran = true
			return nil
		},
		Elicit: r.elicit(ctx, t, c.ID, server),
	})
	switch {
	case ctx.Err() != nil && ev.Ran:
		ev.OK = false
		ev.Result = resultJSON(map[string]any{"error": InterruptedWhileCalling, "server": server, "tool": tool})
	case ctx.Err() != nil:
		errorResult(ev, "not sent: the turn was interrupted before the call was sent")
	case errors.Is(err, mcp.ErrUnavailable), errors.Is(err, mcp.ErrNotSent):
		ev.Ran = false
		errorResult(ev, "not sent: %v", err)
	case err != nil:
		ev.OK = false
		ev.Result = resultJSON(map[string]any{"error": fmt.Sprintf("the call was sent but did not complete: %v; its effects are unknown", err),
			"server": server, "tool": tool})
	default:
		ev.Result, ev.OK = mcp.FormatResult(server, tool, res, r.Config.OutputLimit)
	}
}

// elicit answers a server's elicitation during the call callID with a
// clarify prompt of the turn (fenced by its generation like every prompt):
// one question per property of the requested schema, choices from its
// enum (or true/false), the answers converted to the property's type.
// No answer (timeout, interrupt) declines; the turn's end cancels.
func (r *Runner) elicit(turnCtx context.Context, t Turn, callID, server string) mcp.ElicitFunc {
	return func(reqCtx context.Context, message string, schema json.RawMessage) (*sdk.ElicitResult, error) {
		ctx, cancel := context.WithCancel(turnCtx)
		defer cancel()
		stop := context.AfterFunc(reqCtx, cancel)
		defer stop()
		props := elicitProps(schema)
		qs := make([]protocol.ClarifyQuestion, 0, max(1, len(props)))
		head := fmt.Sprintf("The MCP server %q asks: %s", server, message)
		for i, p := range props {
			q := protocol.ClarifyQuestion{ID: p.name, Question: p.label(), Choices: p.choices()}
			if i == 0 {
				q.Question = head + "\n" + q.Question
			}
			qs = append(qs, q)
		}
		if len(qs) == 0 {
			qs = append(qs, protocol.ClarifyQuestion{ID: "confirm", Question: head, Choices: []string{"accept", "decline"}})
		}
		out, err := r.Prompter.Ask(ctx, prompts.Ask{SessionID: t.SessionID, AdmissionID: t.AdmissionID, Generation: t.Generation, LeaseEpoch: t.LeaseEpoch,
			Kind: prompts.KindClarify, Timeout: r.Config.ClarifyTimeout, Payload: protocol.ClarifyPayload{ToolCallID: callID, Questions: qs}})
		if err != nil || ctx.Err() != nil {
			return &sdk.ElicitResult{Action: "cancel"}, nil
		}
		if out.Resolution != prompts.ResolutionAnswered {
			return &sdk.ElicitResult{Action: "decline"}, nil
		}
		var ans struct {
			Answer json.RawMessage `json:"answer"`
		}
		json.Unmarshal(out.Response, &ans)
		var answers []string
		var one string
		if json.Unmarshal(ans.Answer, &one) == nil {
			answers = []string{one}
		} else {
			json.Unmarshal(ans.Answer, &answers)
		}
		if len(props) == 0 {
			if len(answers) == 1 && answers[0] == "accept" {
				return &sdk.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
			}
			return &sdk.ElicitResult{Action: "decline"}, nil
		}
		content := map[string]any{}
		for i, p := range props {
			if i >= len(answers) {
				break
			}
			if v, ok := p.convert(answers[i]); ok {
				content[p.name] = v
			}
		}
		return &sdk.ElicitResult{Action: "accept", Content: content}, nil
	}
}

// elicitProp is one property of an elicitation's requested schema.
type elicitProp struct {
	name, typ, title, desc string
	enum                   []string
	required               bool
}

func (p elicitProp) label() string {
	l := p.title
	if l == "" {
		l = p.name
	}
	if p.desc != "" {
		l += ": " + p.desc
	}
	if p.typ != "" && p.typ != "string" {
		l += " (" + p.typ + ")"
	}
	return l
}

func (p elicitProp) choices() []string {
	if len(p.enum) > 0 {
		return p.enum
	}
	if p.typ == "boolean" {
		return []string{"true", "false"}
	}
	return nil
}

func (p elicitProp) convert(a string) (any, bool) {
	switch p.typ {
	case "integer":
		n, err := strconv.ParseInt(strings.TrimSpace(a), 10, 64)
		return n, err == nil
	case "number":
		f, err := strconv.ParseFloat(strings.TrimSpace(a), 64)
		return f, err == nil
	case "boolean":
		b, err := strconv.ParseBool(strings.TrimSpace(a))
		return b, err == nil
	}
	return a, true
}

// elicitProps reads a flat object schema's properties, required first,
// then by name.
func elicitProps(schema json.RawMessage) []elicitProp {
	var sch struct {
		Properties map[string]struct {
			Type        string   `json:"type"`
			Title       string   `json:"title"`
			Description string   `json:"description"`
			Enum        []string `json:"enum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	json.Unmarshal(schema, &sch)
	var out []elicitProp
	for n, p := range sch.Properties {
		req := false
		for _, r := range sch.Required {
			req = req || r == n
		}
		out = append(out, elicitProp{name: n, typ: p.Type, title: protocol.Visible(p.Title), desc: protocol.Visible(p.Description), enum: p.Enum, required: req})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].required != out[j].required {
			return out[i].required
		}
		return out[i].name < out[j].name
	})
	return out
}

// sandboxPolicyOf is a session's sandbox policy (nil: off).
func sandboxPolicyOf(s Session) *sandbox.Policy {
	if s.Sandbox == nil {
		return nil
	}
	return &s.Sandbox.Policy
}
