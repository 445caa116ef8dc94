package risk

import "testing"

// A script that an earlier command of the same turn wrote, unseen by a
// person, is rated script-written when a later command runs it (issue 22:
// "write a script, then run it" in two safe steps planted persistence).
// Files the turn did not write, and commands that run nothing, keep their
// rating.
func TestScriptWrittenEarlierInTheTurn(t *testing.T) {
	written := map[string]bool{"s.sh": true, "tools/run.py": true, "Makefile": true, "/abs/x.sh": true}
	cx := Context{WrittenInTurn: func(p string) bool { return written[p] }}
	for _, c := range []struct {
		cmd  string
		want Risk
	}{
		{"sh s.sh", RiskDangerous},
		{"bash ./s.sh", RiskDangerous},
		{"./s.sh", RiskDangerous},
		{". s.sh", RiskDangerous},
		{"python3 tools/run.py", RiskDangerous},
		{"make", RiskDangerous},
		{"sh /abs/x.sh", RiskDangerous},
		{"sh other.sh", RiskSafe},
		{"cat s.sh", RiskSafe},
		{"ls", RiskSafe},
	} {
		got := ClassifyWith(c.cmd, cx)
		if got.Risk != c.want {
			t.Errorf("%q: %s (%s), want %s", c.cmd, got.Risk, got.Reason, c.want)
		}
		if c.want == RiskDangerous && got.Pattern != string(KeyScriptWritten) {
			t.Errorf("%q: pattern %q, want %s", c.cmd, got.Pattern, KeyScriptWritten)
		}
		if plain := Classify(c.cmd); plain.Risk != RiskSafe {
			t.Errorf("%q without the turn: %s, want safe", c.cmd, plain.Risk)
		}
	}
}
