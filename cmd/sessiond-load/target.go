package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sessiond/sessiond/fixtures/fakemodel"
	"github.com/sessiond/sessiond/rpc"
)

// descriptor is HOME/daemon.json (PROTOCOL.md section 1); like sessionctl,
// this tool does not import the daemon package.
type descriptor struct {
	PID      int    `json:"pid"`
	URL      string `json:"url"`
	Token    string `json:"token"`
	Protocol int    `json:"protocol"`
	Version  string `json:"version"`
}

func readDescriptor(home string) (descriptor, error) {
	var d descriptor
	path := filepath.Join(home, "daemon.json")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return d, fmt.Errorf("no daemon running for home %s (no daemon.json)", home)
	}
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil || d.URL == "" {
		return d, fmt.Errorf("%s is not a daemon descriptor", path)
	}
	return d, nil
}

// dial opens one authenticated connection. onNote, when set, receives every
// notification on the connection's reading goroutine.
func dial(ctx context.Context, desc descriptor, timeout time.Duration, onNote func(rpc.Notification)) (*rpc.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	opt := rpc.DialOptions{Token: desc.Token, OnNotification: onNote}
	if onNote == nil {
		opt.OnNotification = func(rpc.Notification) {} // no queue, no pump goroutine
	}
	return rpc.Dial(dctx, desc.URL, opt)
}

// startModel starts the in-process fake model: every reply streams text
// after think (then chunk between chunks); a request whose last user text
// starts with toolPrefix gets one terminal tool call running `true`, and
// the request carrying its result gets the final text.
func startModel(think, chunk time.Duration) (*fakemodel.Model, error) {
	m, err := fakemodel.Start()
	if err != nil {
		return nil, err
	}
	m.SetRecording(false)
	const text = "Done. This is the fake model's streamed answer to a load-test input."
	m.DefaultFunc(func(r fakemodel.RecordedRequest) fakemodel.Reply {
		if strings.HasPrefix(r.LastUserText(), toolPrefix) && !r.LastIsToolResult {
			return fakemodel.Reply{Delay: think, ChunkDelay: chunk,
				ToolCalls: []fakemodel.ToolCall{{Name: "terminal", Arguments: `{"command":"true"}`}}}
		}
		return fakemodel.Reply{Text: text, Delay: think, ChunkDelay: chunk}
	})
	return m, nil
}

// toolPrefix starts the inputs whose turn runs one tool call.
const toolPrefix = "tool: "

// spawnedDaemon is a sessiond process this tool started on a temporary home.
type spawnedDaemon struct {
	cmd        *exec.Cmd
	home       string
	stderrPath string
	exited     chan struct{}
	state      *os.ProcessState
}

// baseConfig is the spawned daemon's config.yaml before --config-extra is
// merged in: the fake model as default, approvals that never ask (the only
// tool command is `true`), and room for the run's connections.
func baseConfig(modelURL string, clients int) map[string]any {
	return map[string]any{
		"model":     map[string]any{"provider": "openai", "default": fakemodel.ModelName, "base_url": modelURL},
		"approvals": map[string]any{"mode": "off"},
		"limits":    map[string]any{"max_connections": max(4096, clients+256)},
	}
}

// mergeConfig deep-merges the YAML mapping extra into base (extra wins;
// nested mappings merge key by key) and returns the YAML text.
func mergeConfig(base map[string]any, extra string) ([]byte, error) {
	if strings.TrimSpace(extra) != "" {
		var over map[string]any
		if err := yaml.Unmarshal([]byte(extra), &over); err != nil {
			return nil, fmt.Errorf("--config-extra: %w", err)
		}
		mergeMaps(base, over)
	}
	return yaml.Marshal(base)
}

func mergeMaps(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeMaps(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

// spawn starts bin on a fresh temporary home with config and waits until
// its descriptor names it and an authenticated connection succeeds.
func spawn(ctx context.Context, bin string, config []byte, timeout time.Duration) (*spawnedDaemon, descriptor, error) {
	var desc descriptor
	abs, err := exec.LookPath(bin)
	if err == nil {
		// The daemon runs in its home: a relative path must not be
		// resolved there.
		abs, err = filepath.Abs(abs)
	}
	if err != nil {
		return nil, desc, fmt.Errorf("--spawn: %w", err)
	}
	home, err := os.MkdirTemp("", "sessiond-load-home-")
	if err != nil {
		return nil, desc, err
	}
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), config, 0o600); err != nil {
		os.RemoveAll(home)
		return nil, desc, err
	}
	s := &spawnedDaemon{home: home, stderrPath: filepath.Join(home, "sessiond.stderr"), exited: make(chan struct{})}
	logf, err := os.Create(s.stderrPath)
	if err != nil {
		os.RemoveAll(home)
		return nil, desc, err
	}
	cmd := exec.Command(abs, "--home", home)
	cmd.Env = daemonEnv(os.Environ())
	cmd.Dir = home
	cmd.Stdout, cmd.Stderr = logf, logf
	setProcAttrs(cmd)
	s.cmd = cmd
	started := make(chan error, 1)
	go func() {
		// With Pdeathsig the child is signalled when the thread that forked
		// it exits, so that thread lives as long as the child.
		runtime.LockOSThread()
		err := cmd.Start()
		started <- err
		if err == nil {
			cmd.Wait()
			s.state = cmd.ProcessState
		}
		logf.Close()
		close(s.exited)
	}()
	if err := <-started; err != nil {
		os.RemoveAll(home)
		return nil, desc, fmt.Errorf("start %s: %w", abs, err)
	}
	deadline := time.Now().Add(timeout)
	backoff := 5 * time.Millisecond
	for {
		select {
		case <-s.exited:
			return s, desc, fmt.Errorf("%s exited (%v) before becoming ready; stderr:\n%s", abs, s.state, s.stderrTail(4096))
		default:
		}
		d, err := readDescriptor(home)
		if err == nil && d.PID == cmd.Process.Pid {
			c, derr := dial(ctx, d, 2*time.Second, nil)
			if derr == nil {
				c.Close()
				return s, d, nil
			}
			err = derr
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.stop(5 * time.Second)
			return s, desc, fmt.Errorf("%s did not become ready within %v (last: %v)", abs, timeout, err)
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

// daemonEnv is this process's environment without variables that would
// point the daemon elsewhere (OPENAI_*, SESSIOND_*), plus a dummy API key.
func daemonEnv(base []string) []string {
	var env []string
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "OPENAI_") || strings.HasPrefix(k, "SESSIOND_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "OPENAI_API_KEY=sessiond-load")
}

// stop sends SIGTERM (graceful stop), waits up to timeout, then SIGKILLs.
// It returns the exit code (-1 for a signal) and whether SIGKILL was needed.
func (s *spawnedDaemon) stop(timeout time.Duration) (code int, killed bool) {
	select {
	case <-s.exited:
	default:
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(timeout)
		select {
		case <-s.exited:
			t.Stop()
		case <-t.C:
			_ = s.cmd.Process.Kill()
			<-s.exited
			killed = true
		}
	}
	if s.state == nil {
		return -1, killed
	}
	return s.state.ExitCode(), killed
}

func (s *spawnedDaemon) stderrTail(n int) string {
	b, _ := os.ReadFile(s.stderrPath)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// crashMarkers returns the stderr lines that show a panic, a data race or a
// runtime fatal error.
func (s *spawnedDaemon) crashMarkers() []string {
	b, _ := os.ReadFile(s.stderrPath)
	var out []string
	for _, line := range bytes.Split(b, []byte("\n")) {
		l := string(line)
		if strings.Contains(l, "panic:") || strings.Contains(l, "DATA RACE") || strings.HasPrefix(l, "fatal error:") {
			out = append(out, l)
		}
	}
	return out
}

// writeTokenFile writes a fresh random token (64 hex characters) to path,
// mode 0600: the auth.token_file of spawned daemons sharing a store.
func writeTokenFile(path string) error {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(hex.EncodeToString(b)+"\n"), 0o600)
}

// redactDSN replaces dsn's password in text by "xxxxx" (the report quotes
// the spawned daemons' config.yaml).
func redactDSN(text, dsn string) string {
	u, err := url.Parse(dsn)
	if dsn == "" || err != nil || u.User == nil {
		return text
	}
	if _, ok := u.User.Password(); !ok {
		return text
	}
	red := *u
	red.User = url.UserPassword(u.User.Username(), "xxxxx")
	return strings.ReplaceAll(text, dsn, red.String())
}
