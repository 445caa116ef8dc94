package agent

import "testing"

func TestUnanalysablePatternsAreNeverRememberedBroadly(t *testing.T) {
	for p, want := range map[string]bool{
		"rm-recursive": false, "git-push-force+rm-recursive": false,
		"inline-code": true, "exec-option": true, "rm-recursive-dynamic": true,
		"inline-code+rm-recursive": true, "git-clean-force+script-written": true, "unparseable": true,
	} {
		if got := isUnanalysable(p); got != want {
			t.Errorf("isUnanalysable(%q) = %v, want %v", p, got, want)
		}
	}
}
