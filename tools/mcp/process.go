package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/sandbox"
)

// stopGrace is how long a stdio server gets to exit after its stdin is
// closed (the MCP spec's shutdown) before its process group is killed.
const stopGrace = 2 * time.Second

// stderrTail is how much of a server's stderr is kept to explain its
// failure.
const stderrTail = 2048

// process is a running stdio server: its process group, its MCP stream
// (stdin, stdout) and the tail of its stderr.
type process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	tmp    string
	stderr *tailBuffer
	exited chan struct{} // closed once cmd.Wait returned
	err    error         // cmd.Wait's, once exited is closed
	once   sync.Once
}

// quote makes s one word of a POSIX shell line.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// shellLine is the line the sandbox helper's /bin/sh runs: export the
// server's own env (sorted by name, then extra's NAME=VALUE entries, which
// win), cd to the server's cwd, then exec the command with its args (the
// PATH of that environment finds a bare command name, e.g. npx). The
// server's env is set by the confined shell, never given to the helper:
// LD_PRELOAD, LD_LIBRARY_PATH or LD_AUDIT in it would load code into the
// helper before it confines anything. Names are valid variable names
// (protocol.ValidateMCPServer).
func shellLine(cwd, command string, args []string, own map[string]string, extra ...string) string {
	var b strings.Builder
	keys := make([]string, 0, len(own))
	for k := range own {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	vars := make([]string, 0, len(keys)+len(extra))
	for _, k := range keys {
		vars = append(vars, k+"="+quote(own[k]))
	}
	for _, kv := range extra {
		k, v, _ := strings.Cut(kv, "=")
		vars = append(vars, k+"="+quote(v))
	}
	if len(vars) > 0 {
		b.WriteString("export " + strings.Join(vars, " ") + " && ")
	}
	if cwd != "" {
		b.WriteString("cd -- " + quote(cwd) + " && ")
	}
	b.WriteString("exec " + quote(command))
	for _, a := range args {
		b.WriteString(" " + quote(a))
	}
	return b.String()
}

// startProcess starts a stdio server: through the sandbox helper with the
// session's policy (the network only when cfg.Network), or, where the
// session's sandbox is off, as "/bin/sh -c LINE" in its own process group.
func startProcess(cfg Server, opt *Options) (*process, error) {
	p := &process{stderr: &tailBuffer{max: stderrTail}, exited: make(chan struct{})}
	var cmd *exec.Cmd
	// The process's environment is the allowlist only (the helper's, like
	// a terminal command's); the server's own env is exported by the line.
	env := slices.Clone(opt.Env)
	if opt.Sandbox != nil && opt.Sandbox.Policy.Mode != sandbox.ModeOff {
		if opt.SandboxUnavailable != "" {
			return nil, fmt.Errorf("the session's sandbox cannot be enforced on this system (%s): stdio MCP servers are not started unsandboxed", opt.SandboxUnavailable)
		}
		tmp, err := os.MkdirTemp("", sandbox.TempDirPrefix)
		if err != nil {
			return nil, fmt.Errorf("server temp directory: %w", err)
		}
		p.tmp = sandbox.RealPath(tmp)
		spec := *opt.Sandbox
		spec.Policy.Network = cfg.Network // a server's network is its config entry's, never the session's
		spec.Cwd = opt.Cwd
		spec.TempDir = p.tmp
		spec.Gate = false
		// Every registered daemon home is protected like this daemon's own;
		// a registry that cannot be read starts nothing.
		others, err := sandbox.RegisteredHomes()
		if err != nil {
			os.RemoveAll(p.tmp)
			return nil, fmt.Errorf("sandbox: %w; the server was not started", err)
		}
		spec.Protected = slices.Clone(spec.Protected)
		for _, h := range others {
			if !slices.Contains(spec.Protected, h) {
				spec.Protected = append(spec.Protected, h)
			}
		}
		env = append(env, "TMPDIR="+p.tmp)
		c, err := spec.Command(context.Background(), shellLine(cfg.Cwd, cfg.Command, cfg.Args, cfg.Env, "TMPDIR="+p.tmp))
		if err != nil {
			os.RemoveAll(p.tmp)
			return nil, err
		}
		cmd = c
	} else {
		cmd = exec.Command("/bin/sh", "-c", shellLine(cfg.Cwd, cfg.Command, cfg.Args, cfg.Env))
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	cmd.Dir = opt.Cwd
	cmd.Env = env
	cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		p.cleanup()
		return nil, err
	}
	// Our own pipe for stdout: Wait must not close the read end while
	// the SDK still reads the server's last frames.
	pr, pw, err := os.Pipe()
	if err != nil {
		p.cleanup()
		return nil, err
	}
	cmd.Stdout = pw
	cmd.WaitDelay = time.Second // a leftover holding stderr does not hold Wait
	// The server dies with the daemon (SIGKILL included): Pdeathsig fires
	// when the thread that forked it ends, so it is started and reaped on
	// one locked OS thread that ends only after the server has (one thread
	// per running stdio server). A server that ignores the end of its
	// input is not left behind by a crash.
	setPdeathsig(cmd.SysProcAttr)
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		pr.Close()
		pw.Close()
		p.cleanup()
		return nil, fmt.Errorf("start %s: %w", cfg.Command, err)
	}
	pw.Close()
	p.stdout = pr
	p.cmd = cmd
	return p, nil
}

func (p *process) cleanup() {
	if p.tmp != "" {
		os.RemoveAll(p.tmp)
	}
}

// kill sends SIGKILL to the server's whole process group (the sandbox
// helper is PID 1 of its PID namespace: its death ends everything in it).
func (p *process) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// stop closes stdin, gives the server stopGrace to exit, then kills its
// group, waits for it and removes its temp directory. Idempotent.
func (p *process) stop() {
	p.once.Do(func() {
		p.stdin.Close()
		t := time.NewTimer(stopGrace)
		select {
		case <-p.exited:
		case <-t.C:
		}
		t.Stop()
		p.kill()
		<-p.exited
		p.stdout.Close()
		p.cleanup()
	})
}

// exitError describes how the process ended, with the tail of its
// stderr; "" while it runs.
func (p *process) exitError() string {
	select {
	case <-p.exited:
	default:
		return ""
	}
	msg := "exited"
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			msg = "killed by signal " + ws.Signal().String()
		} else {
			msg = fmt.Sprintf("exited with status %d", ee.ExitCode())
		}
	} else if p.err == nil {
		msg = "exited with status 0"
	}
	if t := strings.TrimSpace(p.stderr.String()); t != "" {
		msg += ": " + lastLines(t, 3)
	}
	return msg
}

// lastLines keeps the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " / ")
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.ToValidUTF8(string(t.b), "\uFFFD")
}
