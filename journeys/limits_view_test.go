//go:build sandboxlimits

// Known limit (README "Security model"): the homes a command is kept out
// of are those registered when it starts; a daemon that starts later with
// its home inside a running command's writable cwd is in reach of that
// command until it ends (bounded by terminal.timeout). Built only with
// -tags sandboxlimits: go test -tags sandboxlimits -run TestAttackViewJourney ./journeys/

package journeys

// Attack round on the allowlisted view (branch attack), end to end. Each
// TestAttackView… not marked "passes" FAILS on the code it was written
// against and says what should hold.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/fixtures"
)

// TestAttackViewJourneyHomeRegisteredLater (FAILS): the homes a command
// keeps out of are those registered when it starts. Daemon A's session
// works in a directory (cwd = root) in which daemon B's home appears
// while a command runs (the person starts `make run`'s ./.home daemon in
// repo-b during a long test run of the agent): A's command, already
// running, sees B's home as an ordinary directory of its cwd, inserts an
// approval_allowlist row into B's state.db and reads B's token in
// daemon.json. Cross-daemon self-approval. What should hold: no command
// of A writes B's allowlist or reads its token.
func TestAttackViewJourneyHomeRegisteredLater(t *testing.T) {
	root := t.TempDir()
	homeB := filepath.Join(root, "repo-b", ".home")
	mA := fixtures.NewFakeModel(t)
	dA := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(mA, "approvals: {mode: manual, timeout: 60}")})
	cA := dA.Dial(t)
	sA := createSession(t, cA, map[string]any{"cwd": root})
	resume(t, cA, sA.SessionID)
	cmd := fmt.Sprintf(`touch started; for i in $(seq 600); do [ -s repo-b/.home/daemon.json ] && sqlite3 repo-b/.home/state.db "SELECT 1 FROM approval_allowlist LIMIT 0" 2>/dev/null && break; sleep 0.1; done; sqlite3 repo-b/.home/state.db "INSERT INTO approval_allowlist(pattern, created_at) VALUES('unsandboxed:rm -rf /', 'x')"; cat repo-b/.home/daemon.json`)
	done := make(chan string, 1)
	go func() {
		res, _ := sbRun(t, dA, cA, mA, sA.SessionID, "wait for b", cmd, false)
		done <- res
	}()
	fixtures.Eventually(t, wait, "A's command runs", func() bool {
		_, err := os.Stat(filepath.Join(root, "started"))
		return err == nil
	})
	os.MkdirAll(homeB, 0o700)
	mB := fixtures.NewFakeModel(t)
	dB := fixtures.StartDaemon(t, fixtures.DaemonOptions{Home: homeB, Config: fixtures.FakeModelConfig(mB, "approvals: {mode: manual, timeout: 60}")})
	var res string
	select {
	case res = <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("A's command did not finish")
	}
	if n := countRows(t, dB, "pattern LIKE 'unsandboxed:%'"); n != 0 {
		t.Errorf("a running command of daemon A wrote %d approval_allowlist rows into daemon B's state.db; its result: %s", n, res)
	}
	if strings.Contains(res, dB.Desc.Token) || modelSaw(mA, dB.Desc.Token) {
		t.Errorf("daemon B's token reached daemon A's model: %s", res)
	}
}
