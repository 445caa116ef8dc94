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
}

// Payload is the approval prompt's payload for the tool call toolCallID
// run in cwd.
func (c ApprovalCard) Payload(toolCallID, cwd string) protocol.ApprovalPayload {
	return protocol.ApprovalPayload{ToolCallID: toolCallID, Command: c.Command, Cwd: cwd, Risk: c.Risk,
		Reason: c.Reason, Pattern: c.Pattern, Choices: c.Choices, Sandbox: c.Sandbox,
		SandboxPermissions: c.SandboxPermissions, Justification: c.Justification}
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
