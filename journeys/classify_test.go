package journeys

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/fixtures"
)

// classifyOutput is one line of "sessiond classify" output.
type classifyOutput struct {
	Command string `json:"command"`
	Risk    string `json:"risk"`
	Rules   []struct {
		Key    string `json:"key"`
		Reason string `json:"reason"`
	} `json:"rules"`
}

// runClassify runs the real binary's classify subcommand and decodes its
// output, one JSON object per line.
func runClassify(t *testing.T, stdin string, args ...string) []classifyOutput {
	t.Helper()
	cmd := exec.Command(fixtures.BuildBinaries(t), append([]string{"classify"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sessiond classify %q: %v\nstderr: %s", args, err, stderr.String())
	}
	var lines []classifyOutput
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var l classifyOutput
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q is not a JSON object: %v", sc.Text(), err)
		}
		if l.Rules == nil {
			t.Fatalf("line %q has no rules array", sc.Text())
		}
		lines = append(lines, l)
	}
	return lines
}

// An operator checks the policy before deploying: commands on stdin, one
// per line, come back one JSON object per line, in order, with their
// risk and rule keys; the exit code is 0 whatever the risks.
func TestClassifyCommandReadsStdin(t *testing.T) {
	in := "ls -la\r\nrm -rf build\n\nrm -rf /\necho 'unterminated\ngit push -f origin main && rm -rf x"
	got := runClassify(t, in)
	want := []struct{ cmd, risk, keys string }{
		{"ls -la", "safe", ""},
		{"rm -rf build", "dangerous", "rm-recursive"},
		{"rm -rf /", "hardline", "rm-root"},
		{"echo 'unterminated", "dangerous", "unparseable"},
		{"git push -f origin main && rm -rf x", "dangerous", "git-push-force rm-recursive"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		var keys []string
		for _, r := range got[i].Rules {
			keys = append(keys, r.Key)
			if r.Reason == "" {
				t.Errorf("%q: rule %s has no reason", w.cmd, r.Key)
			}
		}
		if got[i].Command != w.cmd || got[i].Risk != w.risk || strings.Join(keys, " ") != w.keys {
			t.Errorf("line %d = %+v, want %s %s %q", i, got[i], w.cmd, w.risk, w.keys)
		}
	}
}

// Commands given as arguments are classified instead of stdin, and the
// daemon's home named by --home is protected.
func TestClassifyCommandArgumentsAndHome(t *testing.T) {
	home := filepath.Join(t.TempDir(), "sessiond home")
	got := runClassify(t, "rm -rf /\n", "--home", home, "cat '"+home+"/daemon.json'", "cat notes.txt")
	if len(got) != 2 {
		t.Fatalf("got %+v, want two lines (stdin ignored)", got)
	}
	if got[0].Risk != "dangerous" || len(got[0].Rules) != 1 || got[0].Rules[0].Key != "sessiond-home" {
		t.Errorf("reading the daemon's token = %+v, want dangerous sessiond-home", got[0])
	}
	if got[1].Risk != "safe" {
		t.Errorf("cat notes.txt = %+v, want safe", got[1])
	}
}

// Bad flags are a clear error with exit code 2, and --rules-md prints the
// policy that docs/risk-rules.md holds.
func TestClassifyCommandFlags(t *testing.T) {
	bin := fixtures.BuildBinaries(t)
	out, err := exec.Command(bin, "classify", "--no-such-flag").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "no-such-flag") {
		t.Errorf("bad flag: err %v, output %s; want exit 2 naming the flag", err, out)
	}
	md, err := exec.Command(bin, "classify", "--rules-md").Output()
	if err != nil || !strings.Contains(string(md), "| `rm-recursive` | dangerous |") {
		t.Errorf("--rules-md: err %v, output %.300s", err, md)
	}
}

// The daemon protects its own home, wherever it is: a command that reads
// its token (daemon.json) waits for a person in manual mode, with the
// sessiond-home rule as its pattern, and does not run when denied.
func TestDaemonHomeNeedsApproval(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	home := filepath.Join(t.TempDir(), "custom home")
	out := filepath.Join(t.TempDir(), "stolen")
	cmd := "cp '" + filepath.Join(home, "daemon.json") + "' '" + out + "'"
	m.On("read the token", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("terminal", jsonArgs(map[string]string{"command": cmd}))}}, fixtures.Reply{Text: "done"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Home: home, Config: fixtures.FakeModelConfig(m, "approvals: {mode: manual}")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{"cwd": t.TempDir()})
	resume(t, c, s.SessionID)

	r := submit(t, c, s.SessionID, "token-1", "read the token")
	e := c.WaitEvent(t, wait, func(e fixtures.Event) bool {
		return e.Type == "prompt.opened" && e.AdmissionID == r.AdmissionID
	})
	var opened struct {
		Prompt struct {
			prompt
			Payload struct {
				Risk    string `json:"risk"`
				Pattern string `json:"pattern"`
				Reason  string `json:"reason"`
			} `json:"payload"`
		} `json:"prompt"`
	}
	if err := json.Unmarshal(e.Payload, &opened); err != nil {
		t.Fatal(err)
	}
	p := opened.Prompt
	if p.Kind != "approval" || p.Payload.Risk != "dangerous" || p.Payload.Pattern != "sandboxed:sessiond-home" || !strings.Contains(p.Payload.Reason, "sessiond's home") {
		t.Fatalf("prompt = %+v; want an approval for sessiond-home", p)
	}
	if err := c.Call(ctxT(t), "approval.respond", map[string]any{"session_id": s.SessionID, "prompt_id": p.PromptID,
		"execution_generation": p.ExecutionGeneration, "choice": "deny"}, nil); err != nil {
		t.Fatal(err)
	}
	if got := waitTurn(t, c, r.AdmissionID); got != "completed" {
		t.Fatalf("outcome %s", got)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("the denied command ran: %v", err)
	}
}
