package agent

import (
	"reflect"
	"slices"
	"testing"

	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/sandbox"
	"github.com/sessiond/sessiond/tools"
	"github.com/sessiond/sessiond/tools/risk"
)

// legacyGate is the decision part of the gate as Runner.terminal had it
// before Decide (commit 1d99f30), kept verbatim but for its I/O: allowed
// stands for Prompter.Allowed. It is the oracle proving that Decide, with
// the lookups Runner.approve makes, decides and asks exactly as before.
// When the rules change on purpose, change Decide and delete this file.
func legacyGate(in DecisionInput, allowed func(pattern string) bool) (refused string, ask bool, payload protocol.ApprovalPayload, confined bool) {
	cls := in.Risk
	if cls.Risk == risk.RiskHardline {
		return cls.Reason, false, payload, false
	}
	sandboxed := in.Sandbox != nil && in.Sandbox.Mode != sandbox.ModeOff
	escalated := sandboxed && in.Escalated && in.SandboxUnavailable == ""
	confined = sandboxed && !escalated && in.SandboxUnavailable == ""
	switch in.ApprovalMode {
	case "off":
	case "strict":
		ask = true
	default: // manual
		ask = cls.Risk != risk.RiskSafe
	}
	pattern := cls.Pattern
	if pattern == "" || isUnanalysable(pattern) {
		pattern = "command:" + in.Command
	}
	lookup := []string{pattern}
	if confined {
		pattern = SandboxedPrefix + pattern
		lookup = []string{pattern, lookup[0]}
	}
	choices := ApprovalChoices
	reason := cls.Reason
	switch {
	case escalated:
		ask, pattern, lookup, choices = true, "", nil, EscalationChoices
		reason = "the model asks to run this command OUTSIDE the sandbox: " + in.Justification
	case sandboxed && in.SandboxUnavailable != "":
		ask = true
		reason = "the sandbox is not available (" + in.SandboxUnavailable + "): every command needs approval and runs unsandboxed"
		if cls.Reason != "" {
			reason += "; " + cls.Reason
		}
	}
	for _, p := range lookup {
		if !ask {
			break
		}
		ask = !allowed(p)
	}
	if ask {
		if reason == "" {
			reason = "approvals.mode is strict: every command needs approval"
		}
		sb := protocol.ApprovalSandbox{Mode: string(sandbox.ModeOff), Network: true, WritableRoots: []string{}, Unsandboxed: !confined,
			Unavailable: in.SandboxUnavailable}
		if in.Sandbox != nil {
			roots := in.Sandbox.WritableRoots
			if roots == nil {
				roots = []string{}
			}
			sb.Mode, sb.Network, sb.WritableRoots = string(in.Sandbox.Mode), in.Sandbox.Network, roots
		}
		payload = protocol.ApprovalPayload{ToolCallID: "call_1", Command: in.Command, Cwd: "/w", Risk: protocol.Risk(cls.Risk),
			Reason: reason, Pattern: pattern, Choices: choices, Sandbox: sb}
		if escalated {
			payload.SandboxPermissions = tools.SandboxEscalated
			payload.Justification = in.Justification
		}
	}
	return "", ask, payload, confined
}

// Over the whole sweep of TestDecideInvariantsOverTheRiskCorpus, Decide
// as Runner.approve drives it makes the same allowlist queries, in the
// same order, and gives the same refusal, prompt payload and sandbox as
// the gate before it.
func TestDecideMatchesTheGateBeforeIt(t *testing.T) {
	var n, diffs int
	for _, cc := range readRiskCorpus(t) {
		cls := risk.Classify(cc.cmd)
		for _, mode := range append(decideModes, "bogus") {
			for _, sb := range decideSandboxStates() {
				for _, esc := range []bool{false, true} {
					for _, rem := range rememberedSets(cc.cmd, cls) {
						in := DecisionInput{ApprovalMode: mode, Command: cc.cmd, Risk: cls, Sandbox: sb.policy, SandboxUnavailable: sb.unavailable}
						if esc {
							in.Escalated, in.Justification = true, "the build needs the network"
						}
						var oldQ, newQ []string
						refused, ask, payload, confined := legacyGate(in, func(p string) bool {
							oldQ = append(oldQ, p)
							return slices.Contains(rem, p)
						})
						// Runner.approve's way.
						d := Decide(in)
						if d.Action == ActionAsk {
							for _, p := range d.Lookup {
								newQ = append(newQ, p)
								if slices.Contains(rem, p) {
									in.Remembered = []string{p}
									d = Decide(in)
									break
								}
							}
						}
						n++
						var got protocol.ApprovalPayload
						if d.Card != nil {
							got = d.Card.Payload("call_1", "/w")
						}
						same := slices.Equal(oldQ, newQ) && (refused != "") == (d.Action == ActionRefuse) && refused == d.Reason &&
							ask == (d.Action == ActionAsk) && reflect.DeepEqual(payload, got) && (refused != "" || confined == d.Confined)
						if !same {
							if diffs++; diffs <= 10 {
								t.Errorf("%s %q, approvals %q, sandbox %s, escalated %v, remembered %q:\n\tbefore: refused %q ask %v confined %v queries %q payload %+v\n\tDecide: %+v queries %q payload %+v",
									cc.where, cc.cmd, mode, sb.name, esc, rem, refused, ask, confined, oldQ, payload, d, newQ, got)
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d decisions compared, %d differ", n, diffs)
}
