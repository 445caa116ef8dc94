package journeys

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/fixtures"
)

// prestartProbe prints the command's own view (its mount points), then
// the mount points every thread of PID 1 (the sandbox helper) shows it,
// then its environment less the per-command variables.
const prestartProbe = `cut -d' ' -f5 /proc/self/mountinfo | sort -u; echo =====; ` +
	`for f in /proc/1/mountinfo /proc/1/task/*/mountinfo; do cut -d' ' -f5 "$f"; done | sort -u; echo =====; ` +
	`env | grep -v -e '^TMPDIR=' -e '^SESSIOND_TOOL_RUN=' -e '^PWD=' -e '^SHLVL=' -e '^_=' | sort`

// TestAttackPrestartedHelperShowsNoHostMounts (FAILED before the fix):
// a second session's command, on the helper the first session's command
// left pre-started (same spec and cwd), read the daemon's whole mount
// table through /proc/1/mountinfo (the helper's threads stayed in the
// daemon's mount namespace; mountinfo needs no ptrace access), where the
// cold command of the first session saw only its view. It also gets the
// cold command's environment exactly (nothing of the daemon's leaks into
// the helper waiting with an empty one).
func TestAttackPrestartedHelperShowsNoHostMounts(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: off}"),
		Env: []string{"SESSIOND_ATTACK_SECRET_VAR=daemon-only"}})
	c := d.Dial(t)
	cwd := t.TempDir()
	a := createSession(t, c, map[string]any{"cwd": cwd})
	b := createSession(t, c, map[string]any{"cwd": cwd})
	resume(t, c, a.SessionID)
	resume(t, c, b.SessionID)
	probe := func(sid, text string) (view, pid1 []string, env string) {
		res, _ := sbRun(t, d, c, m, sid, text, prestartProbe, false)
		var r struct {
			ExitCode int    `json:"exit_code"`
			Output   string `json:"output"`
		}
		if err := json.Unmarshal([]byte(res), &r); err != nil || r.ExitCode != 0 {
			t.Fatalf("%s: %s", text, res)
		}
		parts := strings.Split(r.Output, "=====\n")
		if len(parts) != 3 {
			t.Fatalf("%s: %q", text, r.Output)
		}
		return strings.Fields(parts[0]), strings.Fields(parts[1]), parts[2]
	}
	_, coldPID1, coldEnv := probe(a.SessionID, "cold")
	pollHelpers(t, d.PID(), "a pre-started helper", func(h []int) bool { return len(h) == 1 })
	view, prePID1, preEnv := probe(b.SessionID, "pre-started")
	for _, mp := range prePID1 {
		if !slices.Contains(view, mp) {
			t.Errorf("the pre-started helper (PID 1) shows the command %s, a mount outside its view", mp)
		}
	}
	if len(prePID1) > len(coldPID1) {
		t.Errorf("the pre-started helper shows more mounts (%d) than a cold one (%d):\n%v", len(prePID1), len(coldPID1), prePID1)
	}
	if preEnv != coldEnv || strings.Contains(preEnv, "daemon-only") {
		t.Errorf("the pre-started command's environment differs from the cold one's:\ncold:\n%s\npre-started:\n%s", coldEnv, preEnv)
	}
}
