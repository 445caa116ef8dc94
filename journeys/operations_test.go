package journeys

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/fixtures"
)

// freePort returns a loopback port nobody listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestListenFlag: --listen fixes the address (it wins over config.yaml's
// listen and survives a restart); a non-loopback or malformed address is
// refused at start with a line naming the flag.
func TestListenFlag(t *testing.T) {
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: "listen: 127.0.0.1:0\n", Args: []string{"--listen", addr}})
	if want := "ws://" + addr + "/rpc"; d.Desc.URL != want {
		t.Fatalf("descriptor URL %s, want %s", d.Desc.URL, want)
	}
	if code := d.SIGTERM(t); code != 0 {
		t.Fatalf("stop exited %d", code)
	}
	d.Restart(t)
	if want := "ws://" + addr + "/rpc"; d.Desc.URL != want {
		t.Fatalf("after a restart the URL is %s, want %s", d.Desc.URL, want)
	}
	for _, bad := range []struct{ addr, want string }{
		{"0.0.0.0:8765", "--listen: \"0.0.0.0:8765\" is not a loopback address"},
		{"localhost", "--listen: address localhost: missing port in address"},
	} {
		code, stderr := fixtures.StartDaemonExpectFailure(t, fixtures.DaemonOptions{Args: []string{"--listen", bad.addr}})
		if code != 1 || !strings.Contains(stderr, bad.want) {
			t.Errorf("--listen %s: exit %d, want 1 and %q; stderr:\n%s", bad.addr, code, bad.want, stderr)
		}
	}
}

// TestLogFileJSONReopenedOnSIGHUP: --log-file with --log-format json
// writes one JSON object per line to the file (not stderr); after the file
// is moved away (as logrotate does), SIGHUP makes the daemon write to a new
// file at the path, and the moved one gets nothing more.
func TestLogFileJSONReopenedOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sessiond.log")
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Args: []string{"--log-file", path, "--log-format", "json"}})
	records := func(p string) []map[string]any {
		b, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		var out []map[string]any
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var r map[string]any
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s holds a line that is not JSON: %q", p, sc.Text())
			}
			out = append(out, r)
		}
		return out
	}
	has := func(p, msg string) bool {
		for _, r := range records(p) {
			if r["msg"] == msg {
				return true
			}
		}
		return false
	}
	if !has(path, "sessiond listening") {
		t.Fatalf("the log file lacks the listening line: %v", records(path))
	}
	if strings.Contains(d.Stderr(), "sessiond listening") {
		t.Fatalf("with --log-file the log still goes to stderr:\n%s", d.Stderr())
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("log file mode: %v %v", fi.Mode(), err)
	}
	rotated := path + ".1"
	if err := os.Rename(path, rotated); err != nil {
		t.Fatal(err)
	}
	if err := d.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	fixtures.Eventually(t, wait, "the reopen line in the new log file", func() bool { return has(path, "SIGHUP: log file reopened") })
	c := d.Dial(t)
	createSession(t, c, map[string]any{"cwd": t.TempDir(), "model": "m", "provider": "custom", "base_url": "http://127.0.0.1:9/v1"})
	fixtures.Eventually(t, wait, "the session's audit line in the new log file", func() bool { return has(path, "session created") })
	if has(rotated, "session created") {
		t.Fatal("the moved file still receives records after SIGHUP")
	}
	if code := d.SIGTERM(t); code != 0 {
		t.Fatalf("stop exited %d", code)
	}
	if !has(path, "stopped") {
		t.Fatalf("the clean stop's last line is not in the new file: %v", records(path))
	}
}

// TestMakeInstall: make install PREFIX=DIR (a path with a space) puts the
// two binaries, the completion scripts of the three shells and the systemd
// user unit where they belong; the unit starts the installed daemon and
// passes systemd-analyze verify; the installed sessionctl runs.
func TestMakeInstall(t *testing.T) {
	root, err := fixtures.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(t.TempDir(), "my prefix")
	build := filepath.Join(t.TempDir(), "bin")
	cmd := exec.Command("make", "-C", root, "install", "PREFIX="+prefix, "BIN="+build)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	for path, want := range map[string]string{
		"bin/sessiond":   "",
		"bin/sessionctl": "",
		"share/bash-completion/completions/sessionctl":    "__start_sessionctl",
		"share/zsh/site-functions/_sessionctl":            "#compdef sessionctl",
		"share/fish/vendor_completions.d/sessionctl.fish": "complete -c sessionctl",
		"lib/systemd/user/sessiond.service":               `ExecStart="` + prefix + `/bin/sessiond" --home %S/sessiond --listen 127.0.0.1:8765`,
	} {
		b, err := os.ReadFile(filepath.Join(prefix, path))
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s: %v, want it to hold %q", path, err, want)
		}
	}
	out, err := exec.Command(filepath.Join(prefix, "bin/sessionctl"), "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "sessionctl ") {
		t.Fatalf("installed sessionctl --version: %v %s", err, out)
	}
	if analyze, err := exec.LookPath("systemd-analyze"); err == nil {
		out, err := exec.Command(analyze, "verify", filepath.Join(prefix, "lib/systemd/user/sessiond.service")).CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
		}
	} else {
		t.Log("systemd-analyze not installed: the unit's syntax was not verified")
	}
	cmd = exec.Command("make", "-C", root, "uninstall", "PREFIX="+prefix)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make uninstall: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(prefix, "bin/sessiond")); !os.IsNotExist(err) {
		t.Fatalf("make uninstall left bin/sessiond: %v", err)
	}
}
