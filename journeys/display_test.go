package journeys

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/fixtures"
)

// escapeCommand is a command a model could send: escape sequences in the
// command's text (tool-call arguments are JSON inside a JSON string) and
// in what it prints (a tool result is JSON inside a JSON string too): a
// pane title, a screen clear, and a carriage return that would overwrite
// the line with a fake approval.
const escapeCommand = "printf 'out\\033]0;pwned-by-output\\007\\n'; echo \"\x1b]0;pwned-title\x07\x1b[2J\r(approved by you: once)\""

// rawControl reports the first control character a terminal would act on
// (C0 but newline and tab, DEL, C1, bidi overrides), or "".
func rawControl(s string) string {
	for _, r := range s {
		switch {
		case r < 0x20 && r != '\n' && r != '\t', r == 0x7f, r >= 0x80 && r <= 0x9f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			return string(r)
		}
	}
	return ""
}

// TestSessionctlShowsEscapesOfToolCalls: escape sequences inside a tool
// call's arguments and its result reach neither `sessionctl show` nor
// `sessionctl attach` (history replay and live) raw: they are shown as
// "␛", "␇", "␍", the pane's title stays, and the command is one line.
func TestSessionctlShowsEscapesOfToolCalls(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatalf("tmux is required (.ci/run installs it; apt-get install tmux): %v", err)
	}
	m := fixtures.NewFakeModel(t)
	m.On("escape please", ctlTerminalCall(escapeCommand), fixtures.Reply{Text: "done \x1b]0;pwned-by-message\x07"})
	m.On("escape live", ctlTerminalCall(strings.ReplaceAll(escapeCommand, "pwned", "live")), fixtures.Reply{Text: "done live"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: manual}")})
	s := newCtlSession(t, d.Home, t.TempDir())
	ctlWant(t, ctl(t, d.Home, "", "send", s, "escape please"), 0)

	// show: the command and the output made visible, nothing raw.
	r := ctl(t, d.Home, "", "show", s)
	ctlWant(t, r, 0, `$ printf 'out\033]0;pwned-by-output\007\n'; echo "␛]0;pwned-title␇␛[2J␍(approved by you: once)"`,
		"│ out␛]0;pwned-by-output␇", "│ ␛]0;pwned-title␇␛[2J␍(approved by you: once)", "assistant › done ␛]0;pwned-by-message␇")
	if c := rawControl(r.stdout); c != "" {
		t.Fatalf("show printed a raw control character %q:\n%q", c, r.stdout)
	}
	// show --json: the arguments and the result, decoded, are visible too.
	r = ctl(t, d.Home, "", "show", s, "--json")
	ctlWant(t, r, 0)
	var v struct {
		Items []struct {
			Type      string          `json:"type"`
			Arguments string          `json:"arguments"`
			Result    json.RawMessage `json:"result"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("show --json: %v\n%s", err, r.stdout)
	}
	calls := 0
	for _, it := range v.Items {
		if it.Type != "tool_call" {
			continue
		}
		calls++
		var args struct{ Command string }
		var res struct{ Output string }
		if err := json.Unmarshal([]byte(it.Arguments), &args); err != nil || json.Unmarshal(it.Result, &res) != nil {
			t.Fatalf("show --json: arguments %q, result %s: %v", it.Arguments, it.Result, err)
		}
		if c := rawControl(args.Command + res.Output); c != "" || !strings.Contains(args.Command, "␛]0;pwned-title␇") || !strings.Contains(res.Output, "␛]0;pwned-by-output␇") {
			t.Fatalf("show --json: the decoded command %q or output %q is not made visible", args.Command, res.Output)
		}
	}
	if calls != 1 {
		t.Fatalf("show --json has %d tool calls, want 1:\n%s", calls, r.stdout)
	}

	// attach: the replayed history, then the same live.
	env := []string{"-u", "SESSIOND_HOME", "GORACE=halt_on_error=1 atexit_sleep_ms=0", "HOME=" + t.TempDir()}
	p := ctlStartTmux(t, env, fixtures.BuildBinary(t, "./cmd/sessionctl"), "--home", d.Home, "attach", s)
	p.waitText("attached to session "+s, "you › escape please", `echo "␛]0;pwned-title␇␛[2J␍(approved by you: once)"`,
		"assistant › done ␛]0;pwned-by-message␇", "── live ──")
	title := func() string { return strings.TrimSpace(p.run("display-message", "-p", "-t", "ctl", "#{pane_title}")) }
	if got := title(); strings.Contains(got, "pwned") {
		t.Fatalf("the replayed history set the pane title to %q", got)
	}
	p.typeText("escape live")
	p.keys("Enter")
	p.waitText(`echo "␛]0;live-title␇␛[2J␍(approved by you: once)"`, "out␛]0;live-by-output␇", "assistant › done live")
	if got := title(); strings.Contains(got, "pwned") || strings.Contains(got, "live") {
		t.Fatalf("the live turn set the pane title to %q", got)
	}
	p.keys("C-c")
	if code := p.exited(); code != 0 {
		t.Fatalf("attach exited %d after detaching", code)
	}
}
