package agent

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/sandbox"
	"github.com/sessiond/sessiond/tools"
	"github.com/sessiond/sessiond/tools/risk"
)

// The approval decision's invariants (docs/protocol.md §7, E, E3; README
// "Security model"), checked for every command of tools/risk's corpus in
// every approvals mode, sandbox state, escalation request and set of
// remembered approvals. They say what must hold, not what the code does:
//
//   - a hardline command is refused, whatever else holds; nothing else is;
//   - a command runs confined exactly when the session has a sandbox, the
//     system enforces it and the call does not escalate;
//   - an escalation (sandbox on and enforced) asks in every approvals mode,
//     off included, offers only once and deny, remembers nothing, and no
//     remembered approval skips it;
//   - where the person must be asked (strict: every command; manual: a
//     dangerous one; a sandbox that cannot be enforced: every command, in
//     every approvals mode) the command runs unasked only when a remembered
//     approval covers that run: the bare pattern, or "sandboxed:<pattern>"
//     for a confined run only — a sandboxed: rule never allows an
//     unsandboxed run, and "unsandboxed:" entries allow nothing;
//   - elsewhere nothing asks (the gate is not tighter than the docs);
//   - the card says what the docs say it says (pattern, choices, sandbox,
//     reason), and remembered approvals outside Decision.Lookup change
//     nothing, so the agent's lookup of Lookup alone decides as a full
//     list would.

// corpusCommand is one line of tools/risk/testdata/corpus/FAMILY.txt
// ("RISK KEY COMMAND", see tools/risk/corpus_test.go).
type corpusCommand struct {
	where string
	risk  risk.Risk
	cmd   string
}

func readRiskCorpus(t *testing.T) []corpusCommand {
	t.Helper()
	files, err := filepath.Glob("../tools/risk/testdata/corpus/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus files in tools/risk/testdata/corpus: %v", err)
	}
	var out []corpusCommand
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			text := sc.Text()
			if strings.TrimSpace(text) == "" || strings.HasPrefix(text, "#") {
				continue
			}
			if len(strings.Fields(text)) < 3 {
				t.Fatalf("%s:%d: want RISK KEY COMMAND, got %q", f, n, text)
			}
			rest := strings.TrimLeft(text, " \t")
			for range 2 {
				rest = strings.TrimLeft(rest[strings.IndexAny(rest, " \t"):], " \t")
			}
			if strings.HasPrefix(rest, `"`) {
				if rest, err = strconv.Unquote(rest); err != nil {
					t.Fatalf("%s:%d: %v", f, n, err)
				}
			}
			out = append(out, corpusCommand{where: fmt.Sprintf("%s:%d", filepath.Base(f), n), risk: risk.Risk(strings.Fields(text)[0]), cmd: rest})
		}
	}
	return out
}

var (
	decideModes = []string{"manual", "", "strict", "off"}
	unavailable = "Landlock ABI 3 is too old"
)

type sandboxState struct {
	name        string
	policy      *sandbox.Policy
	unavailable string
}

func decideSandboxStates() []sandboxState {
	return []sandboxState{
		{"no sandbox", nil, ""},
		{"policy off", &sandbox.Policy{Mode: sandbox.ModeOff}, ""},
		{"no sandbox, system without one", nil, unavailable},
		{"workspace-write", &sandbox.Policy{Mode: sandbox.ModeWorkspaceWrite}, ""},
		{"workspace-write, network, roots", &sandbox.Policy{Mode: sandbox.ModeWorkspaceWrite, Network: true, WritableRoots: []string{"/srv/cache"}}, ""},
		{"read-only", &sandbox.Policy{Mode: sandbox.ModeReadOnly}, ""},
		{"workspace-write unavailable", &sandbox.Policy{Mode: sandbox.ModeWorkspaceWrite}, unavailable},
		{"read-only unavailable", &sandbox.Policy{Mode: sandbox.ModeReadOnly}, unavailable},
	}
}

// bareOf is the docs' pattern of a command (protocol.md E): the rule key
// (or keys, "a+b"), or for a safe or unanalysable command its text.
func bareOf(cmd string, cls risk.Classification) string {
	if cls.Pattern == "" || risk.Unanalysable(cls.Pattern) {
		return "command:" + cmd
	}
	return cls.Pattern
}

// rememberedSets are the remembered approvals tried with a command: none,
// each spelling of its pattern alone, the legacy unsandboxed: entries,
// each rule of a combined pattern alone, and everything at once.
func rememberedSets(cmd string, cls risk.Classification) [][]string {
	bare := bareOf(cmd, cls)
	legacy := []string{"unsandboxed:" + bare, "unsandboxed:" + cmd, "unsandboxed:command:" + cmd}
	all := append([]string{"", "rm-recursive", bare, SandboxedPrefix + bare, cls.Pattern, "command:" + cmd, SandboxedPrefix + "command:" + cmd, cmd}, legacy...)
	sets := [][]string{nil, {bare}, {SandboxedPrefix + bare}, legacy, {"", "other-rule", SandboxedPrefix + "other-rule"}, all}
	if keys := strings.Split(cls.Pattern, "+"); len(keys) > 1 {
		var parts []string
		for _, k := range keys {
			parts = append(parts, k, SandboxedPrefix+k)
		}
		sets = append(sets, parts)
	}
	return sets
}

// violations lists the invariants d breaks as the decision of in.
func violations(in DecisionInput, d Decision) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	cls := in.Risk
	configured := in.Sandbox != nil && in.Sandbox.Mode != sandbox.ModeOff
	enforced := configured && in.SandboxUnavailable == ""
	escalation := enforced && in.Escalated
	confined := enforced && !in.Escalated
	bare := bareOf(in.Command, cls)
	covered := slices.Contains(in.Remembered, bare) || (confined && slices.Contains(in.Remembered, SandboxedPrefix+bare))
	gated := !escalation && (in.ApprovalMode == "strict" || (in.ApprovalMode != "off" && cls.Risk == risk.RiskDangerous) || (configured && !enforced))
	runs := d.Action == ActionRunSandboxed || d.Action == ActionRunUnsandboxed

	switch d.Action {
	case ActionRefuse, ActionRunSandboxed, ActionRunUnsandboxed, ActionAsk:
	default:
		fail("unknown action %q", d.Action)
	}
	if cls.Risk == risk.RiskHardline {
		if d.Action != ActionRefuse || d.Card != nil || d.Lookup != nil || d.Confined || d.Reason != cls.Reason {
			fail("a hardline command is not refused: %+v", d)
		}
		return bad
	}
	if d.Action == ActionRefuse {
		fail("a %s command is refused", cls.Risk)
		return bad
	}
	if d.Confined != confined {
		fail("confined = %v, want %v (sandbox configured %v, enforced %v, escalated %v)", d.Confined, confined, configured, enforced, in.Escalated)
	}
	if (d.Action == ActionRunSandboxed) != (runs && confined) {
		fail("action %s for a run confined=%v", d.Action, confined)
	}
	if (d.Card != nil) != (d.Action == ActionAsk) {
		fail("card %v with action %s", d.Card != nil, d.Action)
	}
	if strings.HasPrefix(d.AllowedBy, "unsandboxed:") || (d.AllowedBy != "") != (runs && gated) {
		fail("allowed by %q, running %v where asking is due %v", d.AllowedBy, runs, gated)
	}
	switch {
	case escalation:
		if d.Action != ActionAsk {
			fail("an escalation runs unasked (%s, allowed by %q)", d.Action, d.AllowedBy)
			return bad
		}
		c := d.Card
		if !slices.Equal(c.Choices, []protocol.Choice{protocol.ChoiceOnce, protocol.ChoiceDeny}) || c.Pattern != "" || d.Lookup != nil ||
			c.SandboxPermissions != tools.SandboxEscalated || c.Justification != in.Justification || !c.Sandbox.Unsandboxed ||
			c.Reason != "the model asks to run this command OUTSIDE the sandbox: "+in.Justification {
			fail("an escalation's card offers more than one unsandboxed run: %+v, lookup %q", c, d.Lookup)
		}
	case gated:
		if runs != covered {
			fail("asking is due: runs %v (%s, allowed by %q), but a remembered approval covering it: %v", runs, d.Action, d.AllowedBy, covered)
		}
		if d.Action == ActionRunUnsandboxed && !slices.Contains(in.Remembered, bare) {
			fail("an unsandboxed run allowed without the bare pattern %q remembered (%q)", bare, in.Remembered)
		}
		want := []string{bare}
		if confined {
			want = []string{SandboxedPrefix + bare, bare}
		}
		if !slices.Equal(d.Lookup, want) {
			fail("lookup %q, want %q", d.Lookup, want)
		}
	default:
		if !runs || d.Lookup != nil {
			fail("asks (%s, lookup %q) where nothing is due", d.Action, d.Lookup)
		}
	}
	if c := d.Card; c != nil {
		wantSB := protocol.ApprovalSandbox{Mode: "off", Network: true, WritableRoots: []string{}, Unsandboxed: !confined, Unavailable: in.SandboxUnavailable}
		if in.Sandbox != nil {
			wantSB.Mode, wantSB.Network = string(in.Sandbox.Mode), in.Sandbox.Network
			if in.Sandbox.WritableRoots != nil {
				wantSB.WritableRoots = in.Sandbox.WritableRoots
			}
		}
		if !reflect.DeepEqual(c.Sandbox, wantSB) {
			fail("card sandbox %+v, want %+v", c.Sandbox, wantSB)
		}
		if c.Command != in.Command || c.Risk != protocol.Risk(cls.Risk) || c.Reason == "" {
			fail("card %+v for %q (%s)", c, in.Command, cls.Risk)
		}
		if !escalation {
			wantPattern := bare
			if confined {
				wantPattern = SandboxedPrefix + bare
			}
			if c.Pattern != wantPattern || !slices.Equal(c.Choices, protocol.Choices) || c.SandboxPermissions != "" || c.Justification != "" {
				fail("card pattern %q choices %v escalation %q/%q, want pattern %q and every choice", c.Pattern, c.Choices, c.SandboxPermissions, c.Justification, wantPattern)
			}
		}
		switch {
		case escalation:
		case configured && !enforced:
			want := "the sandbox is not available (" + in.SandboxUnavailable + "): every command needs approval and runs unsandboxed"
			if cls.Reason != "" {
				want += "; " + cls.Reason
			}
			if c.Reason != want {
				fail("reason %q, want %q", c.Reason, want)
			}
		case cls.Reason == "":
			if c.Reason != "approvals.mode is strict: every command needs approval" {
				fail("reason %q for a command the classifier gives no reason", c.Reason)
			}
		case c.Reason != cls.Reason:
			fail("reason %q, want the classifier's %q", c.Reason, cls.Reason)
		}
	}

	// Only Lookup's patterns matter; Lookup does not depend on what is
	// remembered; and the agent's way (decide with nothing, look up
	// Lookup in order, decide again with the first found) gives d.
	only := in
	only.Remembered = nil
	for _, p := range in.Remembered {
		if slices.Contains(d.Lookup, p) {
			only.Remembered = append(only.Remembered, p)
		}
	}
	if d2 := Decide(only); !reflect.DeepEqual(d2, d) {
		fail("remembered approvals outside Lookup %q changed the decision: %+v with them, %+v without", d.Lookup, d, d2)
	}
	none := in
	none.Remembered = nil
	d0 := Decide(none)
	if !slices.Equal(d0.Lookup, d.Lookup) {
		fail("lookup %q with remembered approvals, %q without", d.Lookup, d0.Lookup)
	}
	for _, p := range d0.Lookup {
		if slices.Contains(in.Remembered, p) {
			none.Remembered = []string{p}
			d0 = Decide(none)
			break
		}
	}
	if !reflect.DeepEqual(d0, d) {
		fail("deciding as the agent does gives %+v, with the whole list %+v", d0, d)
	}
	return bad
}

// Every corpus command × approvals mode × sandbox state × escalation ×
// remembered approvals keeps the invariants.
func TestDecideInvariantsOverTheRiskCorpus(t *testing.T) {
	corpus := readRiskCorpus(t)
	if len(corpus) < 600 {
		t.Fatalf("%d corpus commands, want the whole corpus (600 or more)", len(corpus))
	}
	var n, failures int
	count := map[Action]int{}
	for _, cc := range corpus {
		cls := risk.Classify(cc.cmd)
		for _, mode := range decideModes {
			for _, sb := range decideSandboxStates() {
				for _, esc := range []bool{false, true} {
					for _, rem := range rememberedSets(cc.cmd, cls) {
						in := DecisionInput{ApprovalMode: mode, Command: cc.cmd, Risk: cls, Sandbox: sb.policy, SandboxUnavailable: sb.unavailable, Remembered: rem}
						if esc {
							in.Escalated, in.Justification = true, "the build needs the network"
						}
						d := Decide(in)
						n++
						count[d.Action]++
						if bad := violations(in, d); len(bad) > 0 {
							if failures++; failures <= 20 {
								t.Errorf("%s %q (%s %s), approvals %q, sandbox %s, escalated %v, remembered %q:\n\t%s",
									cc.where, cc.cmd, cls.Risk, cls.Pattern, mode, sb.name, esc, rem, strings.Join(bad, "\n\t"))
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d corpus commands, %d decisions: %v; %d broke an invariant", len(corpus), n, count, failures)
	for _, a := range []Action{ActionRefuse, ActionRunSandboxed, ActionRunUnsandboxed, ActionAsk} {
		if count[a] == 0 {
			t.Errorf("no decision was %s: the sweep does not cover it", a)
		}
	}
}

var (
	clsRm     = risk.Classification{Risk: risk.RiskDangerous, Reason: "recursive forced delete (rm -rf)", Pattern: "rm-recursive"}
	clsSafe   = risk.Classification{Risk: risk.RiskSafe}
	clsInline = risk.Classification{Risk: risk.RiskDangerous, Reason: "inline interpreter code (python3 -c)", Pattern: "inline-code"}
	clsTwo    = risk.Classification{Risk: risk.RiskDangerous, Reason: "force push; recursive forced delete (rm -rf)", Pattern: "git-push-force+rm-recursive"}
	clsHard   = risk.Classification{Risk: risk.RiskHardline, Reason: "recursive delete of / (rm -rf /)", Pattern: "rm-root"}
	ww        = &sandbox.Policy{Mode: sandbox.ModeWorkspaceWrite}
	wwNet     = &sandbox.Policy{Mode: sandbox.ModeWorkspaceWrite, Network: true, WritableRoots: []string{"/srv/cache"}}
)

// decideRow is one hand-written case: the input, and the decision's
// action, pattern (for an ask) and reason (refusal's or card's) wanted.
type decideRow struct {
	name    string
	in      DecisionInput
	want    Action
	pattern string
	reason  string
	// confinedOnly: for attack rows whose risk the catalogue may change,
	// only "it never runs unsandboxed and is not refused" is asserted.
	confinedOnly bool
}

func decideRows() []decideRow {
	esc := func(in DecisionInput, why string) DecisionInput {
		in.Escalated, in.Justification = true, why
		return in
	}
	cmdIn := func(mode, cmd string, sb *sandbox.Policy, rem ...string) DecisionInput {
		return DecisionInput{ApprovalMode: mode, Command: cmd, Risk: risk.Classify(cmd), Sandbox: sb, Remembered: rem}
	}
	escaped := "echo escaped > /outside/escaped.txt"
	return []decideRow{
		// The rules, by hand.
		{name: "manual, dangerous, sandboxed: asks for the sandboxed pattern", in: DecisionInput{ApprovalMode: "manual", Command: "rm -rf build", Risk: clsRm, Sandbox: ww},
			want: ActionAsk, pattern: "sandboxed:rm-recursive", reason: clsRm.Reason},
		{name: "manual, dangerous, sandboxed, sandboxed: rule", in: DecisionInput{ApprovalMode: "manual", Command: "rm -rf build", Risk: clsRm, Sandbox: ww, Remembered: []string{"sandboxed:rm-recursive"}},
			want: ActionRunSandboxed},
		{name: "manual, dangerous, sandboxed, bare rule", in: DecisionInput{ApprovalMode: "manual", Command: "rm -rf build", Risk: clsRm, Sandbox: ww, Remembered: []string{"rm-recursive"}},
			want: ActionRunSandboxed},
		{name: "manual, dangerous, no sandbox: a sandboxed: rule does not allow it", in: DecisionInput{ApprovalMode: "manual", Command: "rm -rf build", Risk: clsRm, Remembered: []string{"sandboxed:rm-recursive"}},
			want: ActionAsk, pattern: "rm-recursive", reason: clsRm.Reason},
		{name: "manual, dangerous, no sandbox, bare rule", in: DecisionInput{ApprovalMode: "manual", Command: "rm -rf build", Risk: clsRm, Remembered: []string{"rm-recursive"}},
			want: ActionRunUnsandboxed},
		{name: "manual, dangerous, no sandbox: an unsandboxed: entry allows nothing", in: DecisionInput{ApprovalMode: "manual", Command: "rm -rf build", Risk: clsRm, Remembered: []string{"unsandboxed:rm-recursive"}},
			want: ActionAsk, pattern: "rm-recursive", reason: clsRm.Reason},
		{name: "sandbox unavailable: a sandboxed: rule does not allow it", in: DecisionInput{ApprovalMode: "manual", Command: "rm -rf build", Risk: clsRm, Sandbox: ww, SandboxUnavailable: unavailable, Remembered: []string{"sandboxed:rm-recursive"}},
			want: ActionAsk, pattern: "rm-recursive", reason: "the sandbox is not available (" + unavailable + "): every command needs approval and runs unsandboxed; " + clsRm.Reason},
		{name: "sandbox unavailable, approvals off, safe: asks", in: DecisionInput{ApprovalMode: "off", Command: "echo hi", Risk: clsSafe, Sandbox: ww, SandboxUnavailable: unavailable},
			want: ActionAsk, pattern: "command:echo hi", reason: "the sandbox is not available (" + unavailable + "): every command needs approval and runs unsandboxed"},
		{name: "sandbox unavailable, approvals off, safe, bare rule: as in strict", in: DecisionInput{ApprovalMode: "off", Command: "echo hi", Risk: clsSafe, Sandbox: ww, SandboxUnavailable: unavailable, Remembered: []string{"command:echo hi"}},
			want: ActionRunUnsandboxed},
		{name: "sandbox off and the system without one: manual, safe runs", in: DecisionInput{ApprovalMode: "manual", Command: "echo hi", Risk: clsSafe, SandboxUnavailable: unavailable},
			want: ActionRunUnsandboxed},
		{name: "approvals off, dangerous, no sandbox", in: DecisionInput{ApprovalMode: "off", Command: "rm -rf build", Risk: clsRm}, want: ActionRunUnsandboxed},
		{name: "approvals off, dangerous, sandboxed", in: DecisionInput{ApprovalMode: "off", Command: "rm -rf build", Risk: clsRm, Sandbox: ww}, want: ActionRunSandboxed},
		{name: "strict, safe: asks for the command text", in: DecisionInput{ApprovalMode: "strict", Command: "ls", Risk: clsSafe, Sandbox: ww},
			want: ActionAsk, pattern: "sandboxed:command:ls", reason: "approvals.mode is strict: every command needs approval"},
		{name: "strict, safe, remembered text", in: DecisionInput{ApprovalMode: "strict", Command: "ls", Risk: clsSafe, Sandbox: ww, Remembered: []string{"sandboxed:command:ls"}},
			want: ActionRunSandboxed},
		{name: "strict, safe, another text remembered", in: DecisionInput{ApprovalMode: "strict", Command: "ls -la", Risk: clsSafe, Sandbox: ww, Remembered: []string{"sandboxed:command:ls", "command:ls"}},
			want: ActionAsk, pattern: "sandboxed:command:ls -la", reason: "approvals.mode is strict: every command needs approval"},
		{name: "manual, safe, sandboxed", in: DecisionInput{ApprovalMode: "manual", Command: "ls", Risk: clsSafe, Sandbox: ww}, want: ActionRunSandboxed},
		{name: "empty mode is manual", in: DecisionInput{Command: "rm -rf build", Risk: clsRm, Sandbox: ww},
			want: ActionAsk, pattern: "sandboxed:rm-recursive", reason: clsRm.Reason},
		{name: "unanalysable: the rule does not cover it, only the text", in: DecisionInput{ApprovalMode: "manual", Command: "python3 -c 'x'", Risk: clsInline, Sandbox: ww, Remembered: []string{"inline-code", "sandboxed:inline-code"}},
			want: ActionAsk, pattern: "sandboxed:command:python3 -c 'x'", reason: clsInline.Reason},
		{name: "combined pattern: one rule of it does not cover it", in: DecisionInput{ApprovalMode: "manual", Command: "git push -f && rm -rf x", Risk: clsTwo, Sandbox: ww, Remembered: []string{"rm-recursive", "git-push-force", "sandboxed:rm-recursive"}},
			want: ActionAsk, pattern: "sandboxed:git-push-force+rm-recursive", reason: clsTwo.Reason},
		{name: "hardline, approvals off", in: DecisionInput{ApprovalMode: "off", Command: "rm -rf /", Risk: clsHard}, want: ActionRefuse, reason: clsHard.Reason},
		{name: "hardline, escalated, everything remembered", in: esc(DecisionInput{ApprovalMode: "off", Command: "rm -rf /", Risk: clsHard, Sandbox: ww,
			Remembered: []string{"rm-root", "sandboxed:rm-root", "command:rm -rf /"}}, "cleanup"), want: ActionRefuse, reason: clsHard.Reason},
		{name: "escalation, approvals off", in: esc(DecisionInput{ApprovalMode: "off", Command: "echo x > /out/x", Risk: clsSafe, Sandbox: ww}, "needs to write the report"),
			want: ActionAsk, reason: "the model asks to run this command OUTSIDE the sandbox: needs to write the report"},
		{name: "escalation, strict, every spelling remembered", in: esc(DecisionInput{ApprovalMode: "strict", Command: "rm -rf build", Risk: clsRm, Sandbox: wwNet,
			Remembered: []string{"rm-recursive", "sandboxed:rm-recursive", "unsandboxed:rm-recursive", "command:rm -rf build", "unsandboxed:rm -rf build"}}, "why"),
			want: ActionAsk, reason: "the model asks to run this command OUTSIDE the sandbox: why"},
		{name: "escalation in a session without a sandbox changes nothing", in: esc(DecisionInput{ApprovalMode: "manual", Command: "ls", Risk: clsSafe}, "why"), want: ActionRunUnsandboxed},
		{name: "escalation with the sandbox unavailable: asks as every command does", in: esc(DecisionInput{ApprovalMode: "manual", Command: "ls", Risk: clsSafe, Sandbox: ww, SandboxUnavailable: unavailable}, "why"),
			want: ActionAsk, pattern: "command:ls", reason: "the sandbox is not available (" + unavailable + "): every command needs approval and runs unsandboxed"},

		// journeys/attack_sandbox_test.go, TestAttackSandboxCrossDaemonSelfApproval:
		// "unsandboxed:CMD" planted in the allowlist skips no escalation.
		{name: "attack: planted unsandboxed:CMD, escalated", in: esc(cmdIn("manual", escaped, ww, "unsandboxed:"+escaped, "unsandboxed:command:"+escaped), "needed"),
			want: ActionAsk, reason: "the model asks to run this command OUTSIDE the sandbox: needed"},
		{name: "attack: the planting command runs confined", in: cmdIn("manual", `sqlite3 /repo-b/.home/state.db "INSERT INTO approval_allowlist(pattern, created_at) VALUES('unsandboxed:`+escaped+`', 'x')"`, ww),
			confinedOnly: true},
		// TestAttackSandboxRememberedEscalationRunsEditedScript: a
		// "session" answer to an escalation remembers nothing (pattern ""),
		// and no spelling of its text skips the next escalation.
		{name: "attack: escalation of sh build.sh again, every spelling remembered", in: esc(cmdIn("manual", "sh build.sh", ww,
			"", "command:sh build.sh", "sandboxed:command:sh build.sh", "unsandboxed:sh build.sh", "unsandboxed:command:sh build.sh"), "the build needs the network"),
			want: ActionAsk, reason: "the model asks to run this command OUTSIDE the sandbox: the build needs the network"},
		{name: "attack: editing build.sh runs confined", in: cmdIn("manual", "echo 'echo escaped > /outside/escaped' > build.sh", ww), confinedOnly: true},
		// TestAttackSandboxSurvivorReadsNewToken, …CwdSwappedForSymlink,
		// …ReplacesHelperBinary: whatever the classifier says, these run in
		// the sandbox (the wall), never outside it.
		{name: "attack: setsid survivor", in: cmdIn("manual", `setsid sh -c 'while :; do cat /h/daemon.json > /out/tok; sleep 0.2; done' </dev/null >/dev/null 2>&1 &`, ww), confinedOnly: true},
		{name: "attack: cwd swapped for a symlink", in: cmdIn("manual", "cd .. && mv app app.old && ln -s /outside app", ww), confinedOnly: true},
		{name: "attack: helper binary replaced", in: cmdIn("manual", `printf '#!/bin/sh\nexec /bin/sh -c "$3"\n' > bin/x && chmod +x bin/x && mv bin/x bin/sessiond`, ww), confinedOnly: true},
		// journeys/attack_approval_test.go, TestAttackCrossSessionApproval:
		// another session's approval is not in this session's remembered
		// list, so A asks; A's own sandboxed: approval allows A's
		// sandboxed run only.
		{name: "attack: cross-session, A holds nothing", in: cmdIn("manual", "rm -rf victim", ww),
			want: ActionAsk, pattern: SandboxedPrefix + risk.Classify("rm -rf victim").Pattern, reason: risk.Classify("rm -rf victim").Reason},
		{name: "attack: cross-session, A's own approval", in: cmdIn("manual", "rm -rf victim", ww, SandboxedPrefix+risk.Classify("rm -rf victim").Pattern), want: ActionRunSandboxed},
		{name: "attack: cross-session, A's sandboxed approval, A without a sandbox", in: cmdIn("manual", "rm -rf victim", nil, SandboxedPrefix+risk.Classify("rm -rf victim").Pattern),
			want: ActionAsk, pattern: risk.Classify("rm -rf victim").Pattern, reason: risk.Classify("rm -rf victim").Reason},
		// TestAttackCrossSessionClarify: approvals off, the clarify question
		// is the only gate; the delete runs, but confined.
		{name: "attack: approvals off, rm -rf victim", in: cmdIn("off", "rm -rf victim", ww), want: ActionRunSandboxed},
		// journeys TestDaemonHomeNeedsApproval: reading the daemon's token
		// asks (sessiond-home).
		{name: "attack: reading the daemon's token", in: DecisionInput{ApprovalMode: "manual", Command: "cat /home/u/.local/state/sessiond/daemon.json",
			Risk: risk.ClassifyWith("cat /home/u/.local/state/sessiond/daemon.json", risk.Context{ProtectedPaths: []string{"/home/u/.local/state/sessiond"}, Home: "/home/u"}), Sandbox: ww},
			want: ActionAsk, pattern: "sandboxed:sessiond-home", reason: risk.ClassifyWith("cat /home/u/.local/state/sessiond/daemon.json", risk.Context{ProtectedPaths: []string{"/home/u/.local/state/sessiond"}, Home: "/home/u"}).Reason},
	}
}

// The hand-written rows: the rules by example and the attack cases of the
// journeys, each also checked against the invariants.
func TestDecideRows(t *testing.T) {
	for _, row := range decideRows() {
		t.Run(row.name, func(t *testing.T) {
			d := Decide(row.in)
			for _, v := range violations(row.in, d) {
				t.Errorf("invariant: %s", v)
			}
			if row.confinedOnly {
				if d.Action == ActionRefuse || d.Action == ActionRunUnsandboxed || !d.Confined {
					t.Errorf("%q (%s %s): %s, confined %v; want it run in the sandbox", row.in.Command, row.in.Risk.Risk, row.in.Risk.Pattern, d.Action, d.Confined)
				}
				return
			}
			if d.Action != row.want {
				t.Fatalf("action %s, want %s (decision %+v)", d.Action, row.want, d)
			}
			switch {
			case d.Action == ActionRefuse:
				if d.Reason != row.reason {
					t.Errorf("reason %q, want %q", d.Reason, row.reason)
				}
			case d.Action == ActionAsk:
				if d.Card.Pattern != row.pattern || d.Card.Reason != row.reason {
					t.Errorf("card pattern %q reason %q, want %q and %q", d.Card.Pattern, d.Card.Reason, row.pattern, row.reason)
				}
			}
		})
	}
}

// The card becomes the payload the prompt stores, field for field.
func TestApprovalCardPayload(t *testing.T) {
	d := Decide(DecisionInput{ApprovalMode: "off", Command: "make", Risk: clsSafe, Sandbox: wwNet, Escalated: true, Justification: "network"})
	got := d.Card.Payload("call_1", "/w")
	want := protocol.ApprovalPayload{ToolCallID: "call_1", Command: "make", Cwd: "/w", Risk: protocol.Risk(risk.RiskSafe),
		Reason: "the model asks to run this command OUTSIDE the sandbox: network", Pattern: "",
		Choices:            []protocol.Choice{protocol.ChoiceOnce, protocol.ChoiceDeny},
		Sandbox:            protocol.ApprovalSandbox{Mode: "workspace-write", Network: true, WritableRoots: []string{"/srv/cache"}, Unsandboxed: true},
		SandboxPermissions: "escalated", Justification: "network"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("payload\n%+v\nwant\n%+v", got, want)
	}
}

// The MCP gate's invariants (PROTOCOL.md 10.1), for every approvals mode,
// sandbox state, transport, auto_approve and set of remembered approvals:
//
//   - an MCP call is never refused;
//   - it runs confined exactly when its server is a stdio process of an
//     enforced sandbox;
//   - where asking is due (manual or strict and the tool not auto-approved;
//     a configured sandbox that cannot be enforced, in every mode) it runs
//     unasked only when "mcp:<server>/<tool>" is remembered — no terminal
//     pattern, no other tool's or server's, no sandboxed: spelling;
//   - elsewhere nothing asks;
//   - the card is the MCP card: kind mcp, the server, the tool, the
//     arguments, command mcp__<server>__<tool>, pattern mcp:<server>/<tool>,
//     every choice;
//   - no terminal command's lookup holds an "mcp:" pattern, so an MCP
//     approval never lets a command run (checked over the risk corpus).
func mcpViolations(in DecisionInput, d Decision) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	c := in.MCP
	configured := in.Sandbox != nil && in.Sandbox.Mode != sandbox.ModeOff
	enforced := configured && in.SandboxUnavailable == ""
	confined := enforced && c.Stdio
	pattern := "mcp:" + c.Server + "/" + c.Tool
	gated := (in.ApprovalMode != "off" && !c.AutoApproved) || (configured && !enforced)
	runs := d.Action == ActionRunSandboxed || d.Action == ActionRunUnsandboxed
	if d.Action == ActionRefuse {
		fail("an MCP call is refused")
	}
	if d.Confined != confined || (d.Action == ActionRunSandboxed) != (runs && confined) {
		fail("confined %v (%s), want %v", d.Confined, d.Action, confined)
	}
	covered := slices.Contains(in.Remembered, pattern)
	switch {
	case gated:
		if runs != covered {
			fail("asking is due: runs %v (allowed by %q), remembered %q", runs, d.AllowedBy, in.Remembered)
		}
		if runs && d.AllowedBy != pattern {
			fail("allowed by %q, want %q", d.AllowedBy, pattern)
		}
		if !slices.Equal(d.Lookup, []string{pattern}) && d.Action == ActionAsk {
			fail("lookup %q, want [%q]", d.Lookup, pattern)
		}
	default:
		if !runs || d.Card != nil {
			fail("asks (%s) where nothing is due", d.Action)
		}
	}
	if card := d.Card; card != nil {
		if card.Kind != protocol.ApprovalKindMCP || card.Server != c.Server || card.Tool != c.Tool || string(card.Arguments) != string(c.Arguments) ||
			card.Command != "mcp__"+c.Server+"__"+c.Tool || card.Pattern != pattern || !slices.Equal(card.Choices, protocol.Choices) || card.Reason == "" ||
			card.Sandbox.Unsandboxed == confined {
			fail("card %+v", card)
		}
	}
	return bad
}

func TestDecideMCPInvariants(t *testing.T) {
	calls := []MCPCall{
		{Server: "fs", Tool: "write_file", Arguments: []byte(`{"path":"a"}`), Stdio: true},
		{Server: "fs", Tool: "read_file", Arguments: []byte(`{}`), Stdio: true, AutoApproved: true},
		{Server: "web", Tool: "fetch", Arguments: []byte(`{"url":"x"}`), Stdio: true, Network: true},
		{Server: "remote", Tool: "search", Arguments: []byte(`{"q":"x"}`)},
		{Server: "remote", Tool: "search", Arguments: []byte(`{"q":"x"}`), AutoApproved: true},
	}
	var n int
	count := map[Action]int{}
	for _, call := range calls {
		pattern := "mcp:" + call.Server + "/" + call.Tool
		rems := [][]string{nil, {pattern}, {"sandboxed:" + pattern, "mcp:" + call.Server + "/other", "mcp:other/" + call.Tool, "command:" + pattern,
			"mcp__" + call.Server + "__" + call.Tool, "rm-recursive"}, {"", pattern, "x"}}
		for _, mode := range decideModes {
			for _, sb := range decideSandboxStates() {
				for _, rem := range rems {
					c := call
					in := DecisionInput{ApprovalMode: mode, Sandbox: sb.policy, SandboxUnavailable: sb.unavailable, Remembered: rem, MCP: &c,
						// What a terminal input would carry is ignored.
						Command: "rm -rf /", Risk: clsHard, Escalated: true}
					d := Decide(in)
					n++
					count[d.Action]++
					for _, v := range mcpViolations(in, d) {
						t.Errorf("%+v, approvals %q, sandbox %s, remembered %q: %s", call, mode, sb.name, rem, v)
					}
				}
			}
		}
	}
	t.Logf("%d MCP decisions: %v", n, count)
	for _, a := range []Action{ActionRunSandboxed, ActionRunUnsandboxed, ActionAsk} {
		if count[a] == 0 {
			t.Errorf("no MCP decision was %s: the sweep does not cover it", a)
		}
	}
	// No terminal command's remembered patterns are MCP ones.
	for _, cc := range readRiskCorpus(t) {
		cls := risk.Classify(cc.cmd)
		for _, sb := range decideSandboxStates() {
			d := Decide(DecisionInput{ApprovalMode: "strict", Command: cc.cmd, Risk: cls, Sandbox: sb.policy, SandboxUnavailable: sb.unavailable})
			for _, p := range d.Lookup {
				if strings.HasPrefix(p, "mcp:") {
					t.Fatalf("%s %q: lookup %q holds an MCP pattern", cc.where, cc.cmd, d.Lookup)
				}
			}
		}
	}
}

// MCP rows by hand.
func TestDecideMCPRows(t *testing.T) {
	fs := func(mode string, auto bool, sb *sandbox.Policy, unavailable string, rem ...string) DecisionInput {
		return DecisionInput{ApprovalMode: mode, Sandbox: sb, SandboxUnavailable: unavailable, Remembered: rem,
			MCP: &MCPCall{Server: "fs", Tool: "write", Arguments: []byte(`{"p":1}`), Stdio: true, AutoApproved: auto}}
	}
	rows := []struct {
		name   string
		in     DecisionInput
		want   Action
		reason string
	}{
		{"manual asks", fs("manual", false, ww, ""), ActionAsk, mcpManualReason},
		{"manual, auto_approve runs confined", fs("manual", true, ww, ""), ActionRunSandboxed, ""},
		{"strict asks", fs("strict", false, ww, ""), ActionAsk, mcpStrictReason},
		{"strict, auto_approve runs", fs("strict", true, ww, ""), ActionRunSandboxed, ""},
		{"off runs", fs("off", false, ww, ""), ActionRunSandboxed, ""},
		{"off, no sandbox, runs unsandboxed", fs("off", false, nil, ""), ActionRunUnsandboxed, ""},
		{"remembered for the session", fs("manual", false, ww, "", "mcp:fs/write"), ActionRunSandboxed, ""},
		{"a terminal pattern of the same text allows nothing", fs("manual", false, ww, "", "command:mcp:fs/write", "sandboxed:mcp:fs/write"), ActionAsk, mcpManualReason},
		{"sandbox unavailable: auto_approve and off still ask", fs("off", true, ww, unavailable), ActionAsk, "the sandbox is not available (" + unavailable + "): every call needs approval"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			d := Decide(row.in)
			for _, v := range mcpViolations(row.in, d) {
				t.Errorf("invariant: %s", v)
			}
			if d.Action != row.want {
				t.Fatalf("action %s, want %s", d.Action, row.want)
			}
			if d.Action == ActionAsk && d.Card.Reason != row.reason {
				t.Errorf("reason %q, want %q", d.Card.Reason, row.reason)
			}
		})
	}
	// The card's payload carries the MCP fields.
	d := Decide(fs("manual", false, ww, ""))
	got := d.Card.Payload("call_1", "/w")
	if got.Kind != "mcp" || got.Server != "fs" || got.Tool != "write" || string(got.Arguments) != `{"p":1}` || got.Pattern != "mcp:fs/write" ||
		got.Command != "mcp__fs__write" || got.Sandbox.Network || got.Sandbox.Unsandboxed {
		t.Fatalf("payload %+v", got)
	}
}
