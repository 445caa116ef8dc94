package journeys

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/fixtures"
)

// TestAuthTokenFileSharedByDaemons: two daemons on their own homes name one
// auth.token_file. The first creates it (0600); both descriptors carry its
// token, a client holding the file's token is accepted by both, and a
// restart keeps the token.
func TestAuthTokenFileSharedByDaemons(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	tokenFile := filepath.Join(t.TempDir(), "cluster-token")
	cfg := fixtures.FakeModelConfig(m, "auth: {token_file: "+tokenFile+"}")
	a := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: cfg})
	st, err := os.Stat(tokenFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file after the first start: %v, %v; want it created 0600", st, err)
	}
	raw, _ := os.ReadFile(tokenFile)
	token := strings.TrimSpace(string(raw))
	b := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: cfg})
	for name, d := range map[string]*fixtures.Daemon{"A": a, "B": b} {
		if d.Desc.Token != token {
			t.Fatalf("daemon %s's descriptor token differs from the token file", name)
		}
		c := fixtures.Dial(t, d.Desc.URL, token)
		if err := c.Call(ctxT(t), "daemon.info", nil, nil); err != nil {
			t.Fatalf("daemon %s with the file's token: %v", name, err)
		}
	}
	a.SIGTERM(t)
	a.Restart(t)
	if a.Desc.Token != token {
		t.Fatal("the token changed across a restart with auth.token_file")
	}
}

// TestAuthTokenFileRefusedWhenExposed: a token file group- or
// world-readable, or holding no usable token, stops the daemon with an
// error naming the file and the fix.
func TestAuthTokenFileRefusedWhenExposed(t *testing.T) {
	good := strings.Repeat("0123456789abcdef", 4) + "\n"
	for _, c := range []struct {
		name, content string
		mode          os.FileMode
		want          string
	}{
		{"group-readable", good, 0o640, "lets group or others access the token; run chmod 600"},
		{"world-readable", good, 0o644, "lets group or others access the token; run chmod 600"},
		{"empty", "", 0o600, "the file is empty"},
		{"short", "abc\n", 0o600, "at least 32 are needed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tokenFile := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(tokenFile, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(tokenFile, c.mode); err != nil {
				t.Fatal(err)
			}
			code, stderr := fixtures.StartDaemonExpectFailure(t, fixtures.DaemonOptions{
				Config: "auth: {token_file: " + tokenFile + "}\n"})
			if code == 0 || !strings.Contains(stderr, tokenFile) || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit %d; stderr %q; want it to name %s and say %q", code, stderr, tokenFile, c.want)
			}
		})
	}
}
