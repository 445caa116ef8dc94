package agent

import (
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/sandbox"
	"github.com/sessiond/sessiond/tools"
	"github.com/sessiond/sessiond/tools/risk"
)

// DecisionInput is everything the approval decision of one terminal
// command depends on (docs/protocol.md §7, E and E3). It holds values only:
// Decide reads no clock, store or environment.
type DecisionInput struct {
	// ApprovalMode is approvals.mode: "strict" (every command asks), "off"
	// (nothing asks but an escalation or a sandbox that cannot be
	// enforced), anything else "manual" (dangerous commands ask).
	ApprovalMode string
	// Command is the command line as the model gave it; a command approved
	// by its text is remembered as "command:"+Command.
	Command string
	// Risk is Command's classification (risk.ClassifyWith).
	Risk risk.Classification
	// Sandbox is the session's frozen sandbox policy; nil, or Mode
	// sandbox.ModeOff, when commands run unsandboxed.
	Sandbox *sandbox.Policy
	// SandboxUnavailable, when not empty, says why the sandbox cannot be
	// enforced on this system (Session.SandboxUnavailable).
	SandboxUnavailable string
	// Escalated is the call's sandbox_permissions "escalated": run outside
	// the sandbox; Justification is the model's reason for it.
	Escalated     bool
	Justification string
	// Remembered are the remembered approvals of the session: its
	// "session" patterns and the "always" allowlist alike (both allow the
	// same way), as stored, prefixes included. A "sandboxed:P" entry allows
	// only a confined run of pattern P; a bare "P" allows both kinds;
	// "unsandboxed:…" entries (earlier versions) allow nothing. Entries
	// not in Decision.Lookup change nothing, so a caller may pass only the
	// ones of Lookup it found.
	Remembered []string
	// MCP, when not nil, makes this the decision of an MCP tool call
	// (PROTOCOL.md 10.1) instead of a terminal command: Command, Risk,
	// Escalated and Justification are not read.
	MCP *MCPCall
}

// MCPCall is what the gate of an MCP tool call depends on.
type MCPCall struct {
	Server, Tool string
	// Arguments are the model's arguments (a JSON object), for the card.
	Arguments []byte
	// AutoApproved: the tool is in its config.yaml server's auto_approve
	// (a session-given server never is).
	AutoApproved bool
	// Stdio: the server is a process of the session's sandbox (false: a
	// streamable HTTP server, reached by the daemon).
	Stdio bool
	// Network: the server's config entry gives it the network.
	Network bool
	// SessionGiven: the server was given by a client at session.create
	// (not config.yaml's): its name is whatever that client chose, so an
	// approval of its tool never outlives the session (no "always").
	SessionGiven bool
}

// Action is what happens to the command now.
type Action string

const (
	// ActionRefuse: a hardline command, never run in any mode.
	ActionRefuse Action = "refuse"
	// ActionRunSandboxed: run now, in the session's sandbox.
	ActionRunSandboxed Action = "run-sandboxed"
	// ActionRunUnsandboxed: run now, outside any sandbox.
	ActionRunUnsandboxed Action = "run-unsandboxed"
	// ActionAsk: open an approval prompt with Decision.Card; once approved
	// the command runs as Decision.Confined says.
	ActionAsk Action = "ask"
)

// Decision is the outcome of Decide.
type Decision struct {
	Action Action
	// Confined: once allowed (now or by a person) the command runs in the
	// session's sandbox; false: unsandboxed. False with ActionRefuse.
	Confined bool
	// Reason is why a command is refused (the classifier's reason), with
	// ActionRefuse only.
	Reason string
	// Card is the approval prompt's content, with ActionAsk only.
	Card *ApprovalCard
	// Lookup lists the remembered patterns that would let the command run
	// without asking, in the order they are looked up: for a confined run
	// "sandboxed:P" then "P", else "P"; nil when no remembered approval
	// applies (the command runs or is refused regardless, or it is an
	// escalation). It does not depend on Remembered.
	Lookup []string
	// AllowedBy is the remembered pattern that let the command run without
	// asking; "" otherwise.
	AllowedBy string
	// SessionOnly: Lookup is looked up in the session's own approvals
	// only, never in the "always" allowlist (a session-given MCP server).
	SessionOnly bool
}

// ApprovalCard is what an approval prompt shows and offers
// (protocol.ApprovalPayload without the call's id and cwd).
type ApprovalCard struct {
	Command string
	Risk    protocol.Risk
	// Reason says why the person is asked; never empty.
	Reason string
	// Pattern is what a "session" or "always" answer remembers: "" for an
	// escalation, "sandboxed:P" for a confined run, else the bare P.
	Pattern string
	// Choices: ApprovalChoices, or EscalationChoices for an escalation.
	Choices []protocol.Choice
	// Sandbox says where the command would run.
	Sandbox protocol.ApprovalSandbox
	// SandboxPermissions is tools.SandboxEscalated for an escalation, with
	// its Justification; both "" otherwise.
	SandboxPermissions string
	Justification      string
	// Kind, Server, Tool and Arguments describe an MCP tool call's card
	// (Kind protocol.ApprovalKindMCP); empty for a terminal command.
	Kind         string
	Server, Tool string
	Arguments    []byte
}

// Payload is the approval prompt's payload for the tool call toolCallID
// run in cwd.
func (c ApprovalCard) Payload(toolCallID, cwd string) protocol.ApprovalPayload {
	return protocol.ApprovalPayload{ToolCallID: toolCallID, Command: c.Command, Cwd: cwd, Risk: c.Risk,
		Reason: c.Reason, Pattern: c.Pattern, Choices: c.Choices, Sandbox: c.Sandbox,
		SandboxPermissions: c.SandboxPermissions, Justification: c.Justification,
		Kind: c.Kind, Server: c.Server, Tool: c.Tool, Arguments: c.Arguments}
}

// Reasons of approval cards that the classifier does not give.
const (
	strictReason     = "approvals.mode is strict: every command needs approval"
	escalationReason = "the model asks to run this command OUTSIDE the sandbox: "
)

// RememberedPattern is the bare pattern a "session" or "always" approval
// of a command classified cls remembers: the rule's pattern, or, for a
// safe command or one the classifier could not analyse, "command:"+command
// (approving one such command never approves another).
func RememberedPattern(command string, cls risk.Classification) string {
	if cls.Pattern == "" || isUnanalysable(cls.Pattern) {
		return "command:" + command
	}
	return cls.Pattern
}

// Decide is the approval gate of a terminal command, without I/O: from the
// approvals mode, the classification, the sandbox state, the escalation
// request and the remembered approvals it says whether the command is
// refused, runs (sandboxed or not) or asks, and with what card.
//
// The rules (docs/protocol.md E, E3): a hardline command is refused.
// Where the sandbox is configured but unavailable every command runs
// unsandboxed and asks, in every approvals mode, unless a bare remembered
// pattern covers it. An escalation (sandbox configured and available) asks
// always, offers only once/deny, remembers nothing and no remembered
// approval skips it. Otherwise strict asks for every command and manual
// for dangerous ones, unless a remembered approval covers the run:
// "sandboxed:P" only a confined one. Off asks for nothing else.
//
// A caller that cannot list every remembered approval calls Decide with
// none, looks up Decision.Lookup and, if one is remembered, decides again
// with it.
func Decide(in DecisionInput) Decision {
	if in.MCP != nil {
		return decideMCP(in)
	}
	cls := in.Risk
	if cls.Risk == risk.RiskHardline {
		return Decision{Action: ActionRefuse, Reason: cls.Reason}
	}
	sandboxed := in.Sandbox != nil && in.Sandbox.Mode != sandbox.ModeOff
	available := in.SandboxUnavailable == ""
	escalated := sandboxed && available && in.Escalated
	confined := sandboxed && available && !escalated

	var ask bool
	switch in.ApprovalMode {
	case "off":
	case "strict":
		ask = true
	default: // manual
		ask = cls.Risk != risk.RiskSafe
	}
	pattern := RememberedPattern(in.Command, cls)
	lookup := []string{pattern}
	if confined {
		pattern = SandboxedPrefix + pattern
		lookup = []string{pattern, lookup[0]}
	}
	card := &ApprovalCard{Command: in.Command, Risk: protocol.Risk(cls.Risk), Reason: cls.Reason, Pattern: pattern,
		Choices: ApprovalChoices, Sandbox: approvalSandbox(in.Sandbox, in.SandboxUnavailable, confined)}
	switch {
	case escalated:
		// Always asked, in every approval mode, for this one run only:
		// nothing is remembered and no remembered approval applies.
		ask, lookup = true, nil
		card.Pattern, card.Choices = "", EscalationChoices
		card.Reason = escalationReason + in.Justification
		card.SandboxPermissions, card.Justification = tools.SandboxEscalated, in.Justification
	case sandboxed && !available:
		// Fail closed: no sandbox where one is configured.
		ask = true
		card.Reason = "the sandbox is not available (" + in.SandboxUnavailable + "): every command needs approval and runs unsandboxed"
		if cls.Reason != "" {
			card.Reason += "; " + cls.Reason
		}
	}
	if card.Reason == "" {
		card.Reason = strictReason
	}
	run := ActionRunUnsandboxed
	if confined {
		run = ActionRunSandboxed
	}
	if !ask {
		return Decision{Action: run, Confined: confined}
	}
	d := Decision{Action: ActionAsk, Confined: confined, Card: card, Lookup: lookup}
	for _, p := range lookup {
		if remembered(in.Remembered, p) {
			d.Action, d.Card, d.AllowedBy = run, nil, p
			break
		}
	}
	return d
}

// Reasons of MCP approval cards.
const (
	mcpManualReason = "an MCP tool call has effects sessiond cannot classify: in approvals.mode manual every call needs approval unless config.yaml's auto_approve lists its tool"
	mcpStrictReason = "approvals.mode is strict: every MCP tool call needs approval unless config.yaml's auto_approve lists its tool"
)

// decideMCP is the gate of an MCP tool call (PROTOCOL.md 10.1): never
// refused; in manual and strict mode it asks unless the tool is
// auto-approved or "mcp:<server>/<tool>" is remembered; in off mode it
// runs unasked, except that where a configured sandbox cannot be enforced
// every call asks (as every terminal command does). A call is confined
// when its server is a stdio process of an enforced sandbox.
func decideMCP(in DecisionInput) Decision {
	c := in.MCP
	sandboxed := in.Sandbox != nil && in.Sandbox.Mode != sandbox.ModeOff
	available := in.SandboxUnavailable == ""
	confined := sandboxed && available && c.Stdio
	var ask bool
	reason := mcpManualReason
	switch in.ApprovalMode {
	case "off":
	case "strict":
		ask, reason = !c.AutoApproved, mcpStrictReason
	default:
		ask = !c.AutoApproved
	}
	if sandboxed && !available {
		ask = true
		reason = "the sandbox is not available (" + in.SandboxUnavailable + "): every call needs approval"
	}
	run := ActionRunUnsandboxed
	if confined {
		run = ActionRunSandboxed
	}
	if !ask {
		return Decision{Action: run, Confined: confined}
	}
	pattern := protocol.MCPPattern(c.Server, c.Tool)
	var pol *sandbox.Policy
	if in.Sandbox != nil {
		p := *in.Sandbox
		p.Network = c.Network || !c.Stdio // an HTTP server is reached over the network by the daemon
		pol = &p
	}
	card := &ApprovalCard{Command: protocol.MCPToolName(c.Server, c.Tool), Risk: protocol.Risk(risk.RiskDangerous), Reason: reason,
		Pattern: pattern, Choices: ApprovalChoices, Sandbox: approvalSandbox(pol, in.SandboxUnavailable, confined),
		Kind: protocol.ApprovalKindMCP, Server: c.Server, Tool: c.Tool, Arguments: c.Arguments}
	d := Decision{Action: ActionAsk, Confined: confined, Card: card, Lookup: []string{pattern}}
	if c.SessionGiven {
		// Another client may give another program the same name in a
		// later session: approved at most for this session.
		card.Choices, d.SessionOnly = SessionServerChoices, true
	}
	if remembered(in.Remembered, pattern) {
		d.Action, d.Card, d.AllowedBy = run, nil, pattern
	}
	return d
}

func remembered(rules []string, p string) bool {
	for _, r := range rules {
		if r == p {
			return true
		}
	}
	return false
}

// approvalSandbox is an approval card's "sandbox" member: the session's
// sandbox policy (mode, network, writable_roots; nil: off, network on) and
// whether this command would run in it (confined) or unsandboxed.
func approvalSandbox(pol *sandbox.Policy, unavailable string, confined bool) protocol.ApprovalSandbox {
	p := protocol.ApprovalSandbox{Mode: string(sandbox.ModeOff), Network: true, WritableRoots: []string{}, Unsandboxed: !confined,
		Unavailable: unavailable}
	if pol != nil {
		roots := pol.WritableRoots
		if roots == nil {
			roots = []string{}
		}
		p.Mode, p.Network, p.WritableRoots = string(pol.Mode), pol.Network, roots
	}
	return p
}
