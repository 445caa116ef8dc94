package risk

import "testing"

// A relative path into the daemon's home, from a session whose cwd
// contains it (make run's ./.home) or is inside it, touches the home like
// its absolute spelling (found trying the README: with sandbox mode off
// "cat .home/daemon.json" read the token without a prompt).
func TestProtectedRelativeToTheCwd(t *testing.T) {
	cx := Context{ProtectedPaths: []string{"/w/repo/.home"}, Cwd: "/w/repo"}
	for _, c := range []struct {
		cmd  string
		want Risk
	}{
		{"cat .home/daemon.json", RiskDangerous},
		{"cat ./.home/state.db", RiskDangerous},
		{"cd .home && cat daemon.json", RiskDangerous},
		{"sqlite3 .home/state.db .dump", RiskDangerous},
		{"cd sub && cat ../.home/daemon.json", RiskDangerous},
		{"cat README.md", RiskSafe},
		{"ls", RiskSafe},
		{"git status", RiskSafe},
		{"cat .homework/notes", RiskSafe},
	} {
		if got := ClassifyWith(c.cmd, cx); got.Risk != c.want {
			t.Errorf("%q: %s (%s), want %s", c.cmd, got.Risk, got.Reason, c.want)
		}
	}
	inside := Context{ProtectedPaths: []string{"/w/repo/.home"}, Cwd: "/w/repo/.home"}
	if got := ClassifyWith("cat daemon.json", inside); got.Risk != RiskDangerous {
		t.Errorf("cwd inside the home: cat daemon.json is %s", got.Risk)
	}
}
