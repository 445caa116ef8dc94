package journeys

import (
	"bufio"
	"encoding/json"
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
