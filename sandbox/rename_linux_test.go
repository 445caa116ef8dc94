package sandbox

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/fixtures"
)

// A secret the daemon replaces by rename while a command runs (a restart
// writes a new daemon.json) stays out of the command's reach: the command
// works in the home, and reads daemon.json before and after the rename.
func TestSecretReplacedByRenameStaysCovered(t *testing.T) {
	l := newLayout(t)
	s := l.spec(ModeWorkspaceWrite, l.home)
	ready := filepath.Join(l.tmp, "ready")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, err := testCommand(ctx, s, `cat daemon.json; touch "$TMPDIR/ready"; while [ ! -e "$TMPDIR/renamed" ]; do sleep 0.02; done; cat daemon.json; ls`)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = l.home
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + l.tmp}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fixtures.Eventually(t, 20*time.Second, "the command has read daemon.json once", func() bool {
		_, err := os.Stat(ready)
		return err == nil
	})
	tmp := filepath.Join(l.home, "daemon.json.tmp")
	if err := os.WriteFile(tmp, []byte(`{"token":"NEW-TOKEN"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(l.home, "daemon.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.tmp, "renamed"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if strings.Contains(out.String(), "TOKEN") {
		t.Fatalf("the command read the token: %s", out.String())
	}
	if !strings.Contains(out.String(), "config.yaml") {
		t.Fatalf("the home's listing is missing: %s", out.String())
	}
}
