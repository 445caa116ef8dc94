package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// TestLoadTokenCreatesMissingFile: a missing token file is created 0600
// holding a valid token, and the next load returns the same token.
func TestLoadTokenCreatesMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	tok, created, err := LoadToken(path)
	if err != nil || !created {
		t.Fatalf("LoadToken(missing) = %q, created %v, %v", tok, created, err)
	}
	if err := checkToken(tok); err != nil || len(tok) != 64 {
		t.Fatalf("created token %q (len %d): %v", tok, len(tok), err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, %v; want mode 0600", st.Mode(), err)
	}
	again, created, err := LoadToken(path)
	if err != nil || created || again != tok {
		t.Fatalf("second LoadToken = %q, created %v, %v; want %q", again, created, err, tok)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("the directory holds %d entries, want the token file only (no temporary left)", len(entries))
	}
}

// TestLoadTokenConcurrentCreatorsAgree: daemons starting together on a
// missing file (shared storage) end up with one token, none reading a
// half-written file.
func TestLoadTokenConcurrentCreatorsAgree(t *testing.T) {
	for range 20 {
		path := filepath.Join(t.TempDir(), "token")
		var wg sync.WaitGroup
		toks := make([]string, 8)
		errs := make([]error, 8)
		for i := range toks {
			wg.Add(1)
			go func() { defer wg.Done(); toks[i], _, errs[i] = LoadToken(path) }()
		}
		wg.Wait()
		for i := range toks {
			if errs[i] != nil || toks[i] != toks[0] {
				t.Fatalf("loader %d: %q, %v; loader 0: %q", i, toks[i], errs[i], toks[0])
			}
		}
	}
}

// TestLoadTokenReadsFile: the file's token is used, surrounding white
// space (a trailing newline) ignored; a symbolic link to a 0600 file is
// followed; 0400 is accepted.
func TestLoadTokenReadsFile(t *testing.T) {
	dir := t.TempDir()
	want := strings.Repeat("ab12", 8) + "-_.~"
	path := filepath.Join(dir, "token")
	if err := os.WriteFile(path, []byte("  "+want+"\n\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	got, created, err := LoadToken(path)
	if err != nil || created || got != want {
		t.Fatalf("LoadToken = %q, %v, %v; want %q", got, created, err, want)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if got, _, err := LoadToken(link); err != nil || got != want {
		t.Fatalf("LoadToken(symlink) = %q, %v", got, err)
	}
}

// TestLoadTokenRefusesBadFiles: every bad file is refused with an error
// naming the path and saying what is wrong, and never quoting the token.
func TestLoadTokenRefusesBadFiles(t *testing.T) {
	good := strings.Repeat("0123456789abcdef", 4)
	cases := []struct {
		name    string
		content string
		mode    os.FileMode
		want    string
	}{
		{"group-readable", good, 0o640, "mode 0640 lets group or others access the token; run chmod 600"},
		{"world-readable", good, 0o604, "mode 0604"},
		{"group-writable", good, 0o620, "mode 0620"},
		{"empty", "", 0o600, "the file is empty"},
		{"blank", " \n\t\n", 0o600, "the file is empty"},
		{"short", "tooshort", 0o600, "the token has 8 characters, at least 32"},
		{"long", strings.Repeat("a", maxTokenLen+1), 0o600, "longer than 4096"},
		{"space inside", good[:20] + " " + good[20:], 0o600, "character 21 of the token is not allowed"},
		{"two lines", good + "\n" + good, 0o600, "character 65 of the token is not allowed"},
		{"non-ascii", good + "é", 0o600, "character 65 of the token is not allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, c.mode); err != nil {
				t.Fatal(err)
			}
			tok, _, err := LoadToken(path)
			if err == nil {
				t.Fatalf("accepted as %q", tok)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q, want it to name %s and say %q", err, path, c.want)
			}
			if len(c.content) >= 8 && strings.Contains(err.Error(), strings.TrimSpace(c.content)) {
				t.Fatalf("error %q quotes the token", err)
			}
		})
	}
	t.Run("directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "tokendir")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if _, _, err := LoadToken(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("a directory: %v", err)
		}
	})
	t.Run("fifo", func(t *testing.T) {
		fifo := filepath.Join(t.TempDir(), "fifo")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := LoadToken(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("a FIFO: %v", err)
		}
	})
	t.Run("missing directory", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "nodir", "token")
		if _, _, err := LoadToken(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Fatalf("a file in a missing directory: %v", err)
		}
	})
}

// TestLoadTokenEmptyPathIsRandom: without token_file every start has a
// fresh token.
func TestLoadTokenEmptyPathIsRandom(t *testing.T) {
	a, _, err1 := LoadToken("")
	b, _, err2 := LoadToken("")
	if err1 != nil || err2 != nil || a == b || len(a) != 64 {
		t.Fatalf("random tokens %q %q: %v %v", a, b, err1, err2)
	}
}

// TestConfigAuthTokenFile: auth.token_file is read from config.yaml and a
// relative path is relative to the home.
func TestConfigAuthTokenFile(t *testing.T) {
	cfg, warnings, err := LoadConfig(writeTemp(t, "auth: {token_file: secrets/token}"))
	if err != nil || len(warnings) != 0 {
		t.Fatalf("LoadConfig: %v %v", warnings, err)
	}
	if got := cfg.Auth.tokenPath("/home/x"); got != "/home/x/secrets/token" {
		t.Fatalf("relative token_file resolves to %q", got)
	}
	cfg, _, _ = LoadConfig(writeTemp(t, "auth: {token_file: /etc/sessiond/token}"))
	if got := cfg.Auth.tokenPath("/home/x"); got != "/etc/sessiond/token" {
		t.Fatalf("absolute token_file resolves to %q", got)
	}
	if _, _, err := LoadConfig(writeTemp(t, "auth: {token_file: [a]}")); err == nil || !strings.Contains(err.Error(), "auth.token_file") {
		t.Fatalf("a list for token_file: %v", err)
	}
}
