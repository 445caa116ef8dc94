package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sessiond/sessiond/model"
	"github.com/sessiond/sessiond/prompts"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/sandbox"
	"github.com/sessiond/sessiond/tools"
	"github.com/sessiond/sessiond/tools/risk"
)

// Session holds a session's frozen launch settings.
type Session struct {
	ID       string
	Cwd      string
	Model    string
	BaseURL  string
	Toolsets []string
	// ApprovalMode, when set, is the session's approvals mode (manual |
	// strict | off, session.update) in place of Config.ApprovalMode.
	ApprovalMode string
	// Sandbox confines the session's terminal commands (the session's
	// frozen policy and the daemon's home out of reach); nil when its
	// sandbox mode is off: commands run unsandboxed.
	Sandbox *sandbox.Spec
	// SandboxUnavailable, when not empty, says why Sandbox cannot be
	// enforced on this system: every command then needs approval, as in
	// approvals.mode strict, and runs unsandboxed once approved.
	SandboxUnavailable string
	// MCP is the session's MCP servers (nil: none): their tools reach the
	// model as mcp__<server>__<tool>, whatever Toolsets says.
	MCP MCP
}

// Turn identifies the execution being run (admission.Execution).
type Turn struct {
	SessionID   string
	AdmissionID string
	Generation  int64
	LeaseEpoch  prompts.LeaseEpoch
	// Started is when the turn began (Run sets it when zero): files that
	// commands wrote since are unseen by a person (risk.Context.WrittenInTurn).
	Started time.Time
}

// Model streams one chat completion (see model.Client.Stream).
type Model interface {
	Stream(ctx context.Context, req model.Request, onDelta func(text string)) (*model.Response, error)
}

// Prompter opens prompts and reads approval allowlists (see
// prompts.Manager).
type Prompter interface {
	Ask(ctx context.Context, a prompts.Ask) (prompts.Outcome, error)
	Allowed(ctx context.Context, sessionID, pattern string) (bool, error)
	// AllowedInSession is Allowed without the "always" allowlist.
	AllowedInSession(ctx context.Context, sessionID, pattern string) (bool, error)
}

// ToolEvent describes a tool call for tool.started / tool.completed.
type ToolEvent struct {
	CallID   string
	Name     string
	Args     json.RawMessage
	OK       bool
	ExitCode *int
	Result   string // the tool message content given to the model
	Ran      bool   // a process was started (an MCP request sent) for this call
	// MCPServer names the server of an MCP call (in tool.running).
	MCPServer string
}

// Journal persists the turn and emits its events. Every write is fenced:
// it fails with ErrNotLive once the turn's execution is no longer the live
// one, so a stale turn can never write.
type Journal interface {
	// Transcript returns the session's transcript, including this turn's
	// user message.
	Transcript(ctx context.Context, t Turn) ([]Stored, error)
	// AssistantMessage appends an assistant message with tool calls and
	// emits message.completed. The final answer (no tool calls) is not
	// written here but returned in Result.Reply.
	AssistantMessage(ctx context.Context, t Turn, content string, calls []model.ToolCall) error
	// ToolStarted emits tool.started.
	ToolStarted(ctx context.Context, t Turn, ev ToolEvent) error
	// ToolRunning records, durably, that the command of call ev.CallID
	// runs as process group proc (tool.running), so that a boot after a
	// crash can kill it and tell the model it was running, not "not run".
	// proc is the zero identity when it could not be read.
	ToolRunning(ctx context.Context, t Turn, ev ToolEvent, proc tools.ProcessIdentity) error
	// ToolCompleted appends the tool result message and emits
	// tool.completed, in one transaction.
	ToolCompleted(ctx context.Context, t Turn, ev ToolEvent) error
	// Delta emits an ephemeral (not stored) event: message.delta {text} or
	// tool.output {tool_call_id, text}.
	Delta(t Turn, typ protocol.EventType, payload any)
}

// Steering hands the turn the inputs steered into it (prompt.submit with
// when_busy steer, PROTOCOL.md 10.2). Take is called before every model
// request of the turn: it takes every steer waiting for the session into
// the turn, durably and fenced like every Journal write (the steers'
// user messages are appended to the transcript in the same transaction
// that marks them taken), and returns those user messages in order; none
// when nothing waits. The request that follows sends them after the turn's
// tool results, once.
type Steering interface {
	Take(ctx context.Context, t Turn) ([]Stored, error)
}

// ErrNotLive is returned by a Journal when the turn was fenced.
var ErrNotLive = errors.New("turn is no longer live")

// Config bounds turns; durations are wall-clock.
type Config struct {
	ApprovalMode    string        // manual | strict | off
	ApprovalTimeout time.Duration // unanswered approval = deny
	ClarifyTimeout  time.Duration
	MaxIterations   int // model calls per turn
	TerminalTimeout time.Duration
	// MaxTimeout is the longest timeout a terminal call may ask for (its
	// "timeout" argument); a call asking more gets a tool error. Zero means
	// the larger of DefaultMaxTimeout and TerminalTimeout.
	MaxTimeout  time.Duration
	OutputLimit int // bytes of terminal output kept
	// EnvExclude: environment variable name patterns withheld from terminal
	// commands (tools.TerminalOptions.EnvExclude).
	EnvExclude []string
	// EnvPassthrough: variable names (or globs) passed to commands besides
	// tools.AllowedEnv's allowlist (terminal.env_passthrough).
	EnvPassthrough []string
	// ProtectedPaths are directories commands may not touch without
	// approval, such as the daemon's home (risk.Context.ProtectedPaths);
	// UserHome is the home directory commands run with (risk.Context.Home).
	ProtectedPaths []string
	UserHome       string
	// MCPCallTimeout bounds one MCP tools/call (mcp.call_timeout); zero:
	// none.
	MCPCallTimeout time.Duration
	// Prestarts, when not nil, pre-starts each sandboxed session's next
	// command's helper (tools.TerminalOptions.Prestarts); the caller
	// closes it.
	Prestarts *tools.Prestarts
}

// DefaultMaxTimeout is the default of Config.MaxTimeout (terminal.max_timeout).
const DefaultMaxTimeout = 600 * time.Second

// maxTimeout returns the configured limit on a call's timeout argument.
func (c Config) maxTimeout() time.Duration {
	if c.MaxTimeout > 0 {
		return c.MaxTimeout
	}
	return max(DefaultMaxTimeout, c.TerminalTimeout)
}

// Runner runs turns.
type Runner struct {
	Config   Config
	Journal  Journal
	Prompter Prompter
	// NewModel returns the model client for a session's base URL.
	NewModel func(s Session) Model
	// Logger receives a warning for every repair made to a stored
	// transcript before it is sent (see Repair); nil discards them.
	Logger *slog.Logger
	// Steering, when not nil, is asked for steered inputs before every
	// model request.
	Steering Steering
}

// Result of a turn: Outcome is "completed" or "failed" (with Error). A
// cancelled ctx means the caller settles the turn interrupted, whatever
// Run returns.
//
// Reply is set when the model gave its final answer (an assistant message
// without tool calls), which Run does not persist: the caller writes it in
// the transaction that settles the turn, so that the answer and the turn's
// end are one commit (message.completed, then turn.completed), also when
// the turn was interrupted as the answer arrived.
type Result struct {
	Outcome string
	Error   string
	Reply   *string
}

func failed(format string, args ...any) Result {
	return Result{Outcome: "failed", Error: fmt.Sprintf(format, args...)}
}

// Run executes one turn: request → model → tool calls → … until the model
// answers without tool calls (completed) or MaxIterations model calls were
// made (failed), or the model fails (failed with the server's text).
func (r *Runner) Run(ctx context.Context, s Session, t Turn) Result {
	if t.Started.IsZero() {
		t.Started = time.Now()
	}
	transcript, err := r.Journal.Transcript(ctx, t)
	if err != nil {
		return failed("load transcript: %v", err)
	}
	specs, err := tools.Specs(s.Toolsets)
	if err != nil {
		return failed("%v", err)
	}
	var builtin []model.Tool
	for _, sp := range specs {
		builtin = append(builtin, model.Tool{Name: sp.Name, Description: sp.Description, Parameters: sp.Parameters})
	}
	if s.MCP != nil {
		s.MCP.Wait(ctx) // the servers started with the turn: their tools, or why not
	}
	m := r.NewModel(s)
	maxIter := r.Config.MaxIterations
	if maxIter <= 0 {
		maxIter = 50
	}
	for iter := 0; iter < maxIter; iter++ {
		if ctx.Err() != nil {
			return Result{Outcome: "failed", Error: "interrupted"}
		}
		if r.Steering != nil {
			// The model request boundary: inputs steered into the turn
			// join it here, after the tool results of the last reply.
			steered, err := r.Steering.Take(ctx, t)
			if err != nil {
				if ctx.Err() != nil {
					return Result{Outcome: "failed", Error: "interrupted"}
				}
				return failed("take steered input: %v", err)
			}
			transcript = append(transcript, steered...)
		}
		msgs, notes := buildMessages(s.Cwd, transcript)
		// Read at every request: a server that failed since is withdrawn
		// (and the model told), one restarted or changed is offered anew.
		msgs = withMCPNotes(msgs, s.MCP)
		defs := append(slices.Clone(builtin), mcpDefs(s.MCP)...)
		if iter == 0 && r.Logger != nil {
			for _, n := range notes {
				r.Logger.Warn("transcript repaired for the model request", "session", s.ID, "admission", t.AdmissionID, "repair", n)
			}
		}
		req := model.Request{Model: s.Model, Messages: msgs, Tools: defs}
		resp, err := m.Stream(ctx, req, func(text string) {
			r.Journal.Delta(t, protocol.EventMessageDelta, protocol.MessageDeltaPayload{Text: text})
		})
		if err != nil {
			if ctx.Err() != nil {
				return Result{Outcome: "failed", Error: "interrupted"}
			}
			return failed("%v", err) // model.Error texts start with "model: "
		}
		if err := malformed(resp.ToolCalls); err != "" {
			// Nothing of the reply is stored or run: a call to no function
			// cannot be answered, and stored it would be sent back.
			return failed("model: malformed reply: %s; nothing of it was run or kept", err)
		}
		calls := dedupeCalls(resp.ToolCalls, transcript)
		if len(calls) == 0 {
			return Result{Outcome: "completed", Reply: &resp.Content}
		}
		if err := r.Journal.AssistantMessage(ctx, t, resp.Content, calls); err != nil {
			return failed("persist assistant message: %v", err)
		}
		transcript = append(transcript, Stored{Role: model.RoleAssistant, Content: resp.Content, ToolCalls: calls})
		for _, c := range calls {
			if ctx.Err() != nil {
				return Result{Outcome: "failed", Error: "interrupted"}
			}
			ev := ToolEvent{CallID: c.ID, Name: c.Name, Args: rawArgs(c.Arguments)}
			if err := r.Journal.ToolStarted(ctx, t, ev); err != nil {
				return failed("persist tool start: %v", err)
			}
			r.runTool(ctx, s, t, &ev, c)
			if ctx.Err() != nil {
				if ev.Ran {
					// The command was running when the turn was stopped:
					// record that it ran and was killed, so the model never
					// reads "not run" about a command with effects. The write
					// is still fenced on the execution being live.
					r.Journal.ToolCompleted(context.WithoutCancel(ctx), t, ev)
				}
				// Otherwise the settle gives the call its "not run" result.
				return Result{Outcome: "failed", Error: "interrupted"}
			}
			if err := r.Journal.ToolCompleted(ctx, t, ev); err != nil {
				return failed("persist tool result: %v", err)
			}
			transcript = append(transcript, Stored{Role: model.RoleTool, ToolCallID: c.ID, Content: ev.Result})
		}
	}
	return failed("reached agent.max_iterations (%d) model calls without a final answer", maxIter)
}

// malformed says what makes a reply's tool calls unusable ("" when
// nothing): a call without a function name.
func malformed(calls []model.ToolCall) string {
	for i, c := range calls {
		if strings.TrimSpace(c.Name) == "" {
			return fmt.Sprintf("tool call %d (id %q) names no function", i+1, c.ID)
		}
	}
	return ""
}

// dedupeCalls keeps each call of a reply once and gives every call an id
// that is non-empty and unique in the session's transcript, so that
// results pair with calls even when a server omits ids or repeats them.
//
// A call repeated within the reply (same id, same name, same arguments) is
// the same call sent twice and runs once: a call runs at most once per
// reply, keyed by its id. Two different calls that share an id, or a call
// whose id an earlier reply used (some servers number calls "call_0",
// "call_1", … in every response), are distinct calls and get fresh ids.
func dedupeCalls(calls []model.ToolCall, transcript []Stored) []model.ToolCall {
	seen := map[string]bool{}
	for _, m := range transcript {
		for _, c := range m.ToolCalls {
			seen[c.ID] = true
		}
	}
	inReply := map[string]model.ToolCall{}
	out := make([]model.ToolCall, 0, len(calls))
	for i, c := range calls {
		if c.ID != "" {
			if prev, ok := inReply[c.ID]; ok && prev.Name == c.Name && prev.Arguments == c.Arguments {
				continue // the same call, repeated
			}
			if _, ok := inReply[c.ID]; !ok {
				inReply[c.ID] = c
			}
		}
		if c.ID == "" || seen[c.ID] {
			base := fmt.Sprintf("call_%d_%s", i, strings.ReplaceAll(c.ID, " ", ""))
			id := base
			for n := 1; seen[id]; n++ {
				id = fmt.Sprintf("%s_%d", base, n)
			}
			c.ID = id
		}
		seen[c.ID] = true
		out = append(out, c)
	}
	return out
}

func rawArgs(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

func resultJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf(`{"error":%q}`, err.Error())
	}
	return string(b)
}

func errorResult(ev *ToolEvent, format string, args ...any) {
	ev.OK = false
	ev.Result = resultJSON(map[string]string{"error": fmt.Sprintf(format, args...)})
}

func (r *Runner) runTool(ctx context.Context, s Session, t Turn, ev *ToolEvent, c model.ToolCall) {
	allowed := false
	for _, ts := range s.Toolsets {
		if ts == c.Name {
			allowed = true
		}
	}
	if server, tool, ok := protocol.SplitMCPToolName(c.Name); ok {
		r.mcpCall(ctx, s, t, ev, c, server, tool)
		return
	}
	switch {
	case !allowed:
		errorResult(ev, "unknown tool %q; available: %s", c.Name, strings.Join(s.Toolsets, ", "))
	case c.Name == tools.ToolsetTerminal:
		r.terminal(ctx, s, t, ev, c)
	case c.Name == tools.ToolsetClarify:
		r.clarify(ctx, t, ev, c)
	default:
		errorResult(ev, "unknown tool %q", c.Name)
	}
}

// approvalMode is the approvals mode of s's turn: the session's own
// (session.update), else the configured one. Every gate (terminal, MCP)
// reads it here.
func (r *Runner) approvalMode(s Session) string {
	if s.ApprovalMode != "" {
		return s.ApprovalMode
	}
	return r.Config.ApprovalMode
}

// approve is the approval gate's I/O around Decide: it classifies the
// command, looks up the remembered approvals Decide names, opens the
// prompt and waits for the answer. ok: the command may run, confined in
// the session's sandbox or not; !ok: ev holds the result saying why not.
func (r *Runner) approve(ctx context.Context, s Session, t Turn, ev *ToolEvent, callID string, args tools.TerminalArgs) (confined, ok bool) {
	cls := risk.ClassifyWith(args.Command, risk.Context{ProtectedPaths: r.Config.ProtectedPaths, Home: r.Config.UserHome,
		Cwd: s.Cwd, WrittenInTurn: writtenInTurn(s.Cwd, t.Started)})
	in := DecisionInput{ApprovalMode: r.approvalMode(s), Command: args.Command, Risk: cls,
		SandboxUnavailable: s.SandboxUnavailable, Escalated: args.SandboxPermissions == tools.SandboxEscalated, Justification: args.Justification}
	if s.Sandbox != nil {
		in.Sandbox = &s.Sandbox.Policy
	}
	d, ok := r.gate(ctx, s, t, ev, callID, in, "command")
	return d.Confined, ok
}

// gate is the approval gate's I/O around Decide, for a terminal command
// or an MCP call (what names it in the results: "command" or "call"): it
// looks up the remembered approvals Decide names, opens the prompt and
// waits for the answer. ok: the call may run as d says; !ok: ev holds the
// result saying why not.
func (r *Runner) gate(ctx context.Context, s Session, t Turn, ev *ToolEvent, callID string, in DecisionInput, what string) (d Decision, ok bool) {
	d = Decide(in)
	if d.Action == ActionAsk && len(d.Lookup) > 0 {
		// The remembered approvals that matter are those of d.Lookup:
		// looked up in order, the first one found decides again.
		for _, p := range d.Lookup {
			allowed := r.Prompter.Allowed
			if d.SessionOnly {
				allowed = r.Prompter.AllowedInSession
			}
			found, err := allowed(ctx, s.ID, p)
			if err != nil {
				errorResult(ev, "not run: could not read the approval allowlist: %v", err)
				return d, false
			}
			if found {
				in.Remembered = []string{p}
				d = Decide(in)
				break
			}
		}
	}
	switch d.Action {
	case ActionRefuse:
		errorResult(ev, "refused: %s. This %s is never run, in any approval mode.", d.Reason, what)
		return d, false
	case ActionAsk:
		out, err := r.Prompter.Ask(ctx, prompts.Ask{SessionID: t.SessionID, AdmissionID: t.AdmissionID, Generation: t.Generation, LeaseEpoch: t.LeaseEpoch,
			Kind: prompts.KindApproval, Timeout: r.Config.ApprovalTimeout, Payload: d.Card.Payload(callID, s.Cwd)})
		if err != nil || ctx.Err() != nil {
			errorResult(ev, "not run: approval could not complete: %v", err) // fail closed
			return d, false
		}
		var ans struct {
			Choice string `json:"choice"`
		}
		json.Unmarshal(out.Response, &ans)
		switch {
		case out.Resolution == prompts.ResolutionTimedOut:
			errorResult(ev, "not run: the approval timed out, which counts as deny")
			return d, false
		case out.Resolution != prompts.ResolutionAnswered:
			errorResult(ev, "not run: the approval was %s", out.Resolution)
			return d, false
		case ans.Choice == prompts.ChoiceDeny || !prompts.ValidChoice(ans.Choice):
			errorResult(ev, "not run: the user denied this %s", what)
			return d, false
		}
	}
	return d, true
}

// isUnanalysable reports whether any rule of a (possibly combined,
// "a+b") pattern means "could not look inside" rather than a kind of
// action, per the classifier's rule table; approving one must not approve
// others.
func isUnanalysable(pattern string) bool { return risk.Unanalysable(pattern) }

// ApprovalChoices are offered with every approval prompt but an
// escalation's.
var ApprovalChoices = protocol.Choices

// EscalationChoices are offered with an escalation's approval prompt: a run
// outside the sandbox is approved for that one run only, since the same
// command text can run something else next time (a script the model edited
// inside the sandbox meanwhile).
var EscalationChoices = []protocol.Choice{protocol.ChoiceOnce, protocol.ChoiceDeny}

// SessionServerChoices are offered with the approval prompt of a call of a
// session-given MCP server: its name is its client's choice, and another
// client may give another program that name in a later session, so
// "always" is not offered (an "always" answer counts as once) and the
// "always" allowlist never covers it.
var SessionServerChoices = []protocol.Choice{protocol.ChoiceOnce, protocol.ChoiceSession, protocol.ChoiceDeny}

// SandboxedPrefix qualifies a remembered pattern approved for a command
// that ran confined in the sandbox: it satisfies only later sandboxed runs,
// never an unsandboxed one (sandbox mode off, or unavailable). A pattern
// without it was approved for an unsandboxed run and satisfies both.
const SandboxedPrefix = "sandboxed:"

func (r *Runner) terminal(ctx context.Context, s Session, t Turn, ev *ToolEvent, c model.ToolCall) {
	args, err := tools.ParseTerminalArgs(json.RawMessage(c.Arguments))
	if err != nil {
		errorResult(ev, "%v; nothing was run", err)
		return
	}
	if limit := r.Config.maxTimeout(); args.Timeout > 0 && int64(args.Timeout) > int64(limit/time.Second) {
		errorResult(ev, "%v: timeout: %d is greater than the maximum %d seconds (terminal.max_timeout); "+
			"give at most %d, or leave timeout out for the default of %d seconds; nothing was run",
			tools.ErrInvalidTerminalArgs, args.Timeout, int64(limit/time.Second), int64(limit/time.Second), int64(r.Config.TerminalTimeout/time.Second))
		return
	}
	confined, ok := r.approve(ctx, s, t, ev, c.ID, args)
	if !ok {
		return
	}
	if ctx.Err() != nil {
		return
	}
	timeout := r.Config.TerminalTimeout
	if args.Timeout > 0 {
		timeout = time.Duration(args.Timeout) * time.Second // at most maxTimeout, checked above
	}
	marker := tools.NewMarker()
	var spec *sandbox.Spec
	if confined {
		spec = s.Sandbox
	}
	res, err := tools.RunTerminal(ctx, args.Command, tools.TerminalOptions{Cwd: s.Cwd, Timeout: timeout,
		OutputLimit: r.Config.OutputLimit, EnvExclude: r.Config.EnvExclude, Marker: marker, Sandbox: spec, Prestarts: r.Config.Prestarts,
		Env: tools.AllowedEnv(os.Environ(), r.Config.EnvPassthrough, r.Config.EnvExclude),
		// The command runs only once tool.running is durable: after a
		// crash, a call without it never ran, and one with it is killed at
		// the next boot and reported as interrupted while running.
		OnStart: func(pgid int) error {
			proc, _ := tools.Identify(pgid)      // zero when /proc cannot tell: recorded without identity, never killed
			proc.PID, proc.Marker = pgid, marker // the marker as set, not as read back
			if err := r.Journal.ToolRunning(ctx, t, *ev, proc); err != nil {
				return fmt.Errorf("its start could not be recorded: %w", err)
			}
			ev.Ran = true
			return nil
		},
		OnOutput: func(chunk string) {
			r.Journal.Delta(t, protocol.EventToolOutput, protocol.ToolOutputPayload{ToolCallID: c.ID, Text: chunk})
		}})
	if ctx.Err() != nil && ev.Ran {
		ev.OK = false
		ev.Result = resultJSON(map[string]any{"error": InterruptedWhileRunning, "exit_code": -1,
			"output": res.Output, "truncated": res.Truncated, "duration_ms": res.DurationMS})
		return
	}
	if ctx.Err() != nil {
		errorResult(ev, "not run: the turn was interrupted before the command started")
		return
	}
	if err != nil {
		ev.Ran = false
		errorResult(ev, "could not run the command: %v", err)
		return
	}
	code := res.ExitCode
	ev.ExitCode = &code
	ev.OK = res.ExitCode == 0 && !res.TimedOut
	ev.Result = resultJSON(res)
}

func (r *Runner) clarify(ctx context.Context, t Turn, ev *ToolEvent, c model.ToolCall) {
	qs, err := tools.ParseClarifyArgs(json.RawMessage(c.Arguments))
	if err != nil {
		errorResult(ev, "%v", err)
		return
	}
	out, err := r.Prompter.Ask(ctx, prompts.Ask{SessionID: t.SessionID, AdmissionID: t.AdmissionID, Generation: t.Generation, LeaseEpoch: t.LeaseEpoch,
		Kind: prompts.KindClarify, Timeout: r.Config.ClarifyTimeout,
		Payload: protocol.ClarifyPayload{ToolCallID: c.ID, Questions: clarifyQuestions(qs)}})
	if err != nil || ctx.Err() != nil {
		errorResult(ev, "no answer: %v", err)
		return
	}
	result := tools.ClarifyResult{Responses: make([]tools.ClarifyResponse, len(qs))}
	for i, q := range qs {
		choices := q.Choices
		if choices == nil {
			choices = []string{}
		}
		result.Responses[i] = tools.ClarifyResponse{Question: q.Question, ChoicesOffered: choices}
	}
	if out.Resolution != prompts.ResolutionAnswered {
		result.TimedOut = out.Resolution == prompts.ResolutionTimedOut
		result.Note = "No answer came from the user; use your own judgement and say what you assumed."
		ev.OK = true
		ev.Result = resultJSON(result)
		return
	}
	var ans struct {
		Answer json.RawMessage `json:"answer"`
	}
	json.Unmarshal(out.Response, &ans)
	var one string
	var list []string
	switch {
	case json.Unmarshal(ans.Answer, &one) == nil:
		result.Responses[0].Answer = one
	case json.Unmarshal(ans.Answer, &list) == nil:
		if len(qs) > 1 && len(list) == len(qs) {
			for i := range qs { // one answer per question, in order
				result.Responses[i].Answer = list[i]
			}
		} else {
			result.Responses[0].Answer = list
		}
	}
	ev.OK = true
	ev.Result = resultJSON(result)
}

// clarifyQuestions converts parsed questions to their wire shape.
func clarifyQuestions(qs []tools.ClarifyQuestion) []protocol.ClarifyQuestion {
	out := make([]protocol.ClarifyQuestion, len(qs))
	for i, q := range qs {
		out[i] = protocol.ClarifyQuestion{ID: q.ID, Question: q.Question, Choices: q.Choices, MultiSelect: q.MultiSelect}
	}
	return out
}
