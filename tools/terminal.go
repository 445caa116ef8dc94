package tools

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/sandbox"
)

// Defaults of [TerminalOptions].
const (
	// DefaultTerminalTimeout is the run time allowed when TerminalOptions.Timeout is zero.
	DefaultTerminalTimeout = 180 * time.Second
	// DefaultOutputLimit is the output cap in bytes when TerminalOptions.OutputLimit is zero.
	DefaultOutputLimit = 50000
)

// How long RunTerminal waits, after the shell exits and its process group
// has been killed, for processes that left the group but still hold the
// output pipe. Also used as exec.Cmd.WaitDelay.
const drainDelay = 2 * time.Second

// exitGrace is how long, after the shell exits, what it left in its
// process group may go on to finish writing and exit by itself (a tee
// behind a process substitution, a pipeline's last writer) before the
// leftovers are killed. It ends as soon as the output pipe is closed and no
// process of the group is alive; a background job that keeps running (or
// keeps the output pipe open) is killed when it expires.
const exitGrace = time.Second

// graceTick is how often the group is looked at during exitGrace.
const graceTick = 10 * time.Millisecond

// nonInteractiveEnv is added to the daemon's environment for every
// terminal command so that nothing waits for a person: editors, pagers,
// credential prompts and package-manager questions are disabled.
var nonInteractiveEnv = []string{
	"GIT_EDITOR=true",
	"GIT_TERMINAL_PROMPT=0",
	"GIT_PAGER=cat",
	"PAGER=cat",
	"DEBIAN_FRONTEND=noninteractive",
}

// DefaultEnvExclude is the default of terminal.env_exclude: variables whose
// names look like credentials are not passed to terminal commands, so a
// model cannot read the daemon's model API key (or the user's other
// secrets) with a harmless-looking `env`.
var DefaultEnvExclude = []string{"*KEY*", "*SECRET*", "*TOKEN*", "*PASSWORD*", "*CREDENTIAL*"}

// commandEnv returns environ ("NAME=value" entries) without the variables
// whose names match one of the exclude patterns (path.Match globs, compared
// case-insensitively), followed by nonInteractiveEnv. A malformed pattern
// matches nothing.
func commandEnv(environ, exclude []string) []string {
	env := make([]string, 0, len(environ)+len(nonInteractiveEnv))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if name != MarkerEnv && !envExcluded(name, exclude) {
			env = append(env, kv)
		}
	}
	return append(env, nonInteractiveEnv...)
}

func envExcluded(name string, exclude []string) bool {
	upper := strings.ToUpper(name)
	for _, p := range exclude {
		if ok, _ := path.Match(strings.ToUpper(p), upper); ok {
			return true
		}
	}
	return false
}

// TerminalArgs are the model's arguments to the terminal tool (PROTOCOL §7).
type TerminalArgs struct {
	// Command is a /bin/sh command line.
	Command string `json:"command"`
	// Timeout is the run time limit in seconds; 0 means the session default.
	Timeout int `json:"timeout,omitempty"`
	// SandboxPermissions is "" (run in the session's sandbox) or
	// SandboxEscalated: run outside it, only after a person approves.
	SandboxPermissions string `json:"sandbox_permissions,omitempty"`
	// Justification says why the command must run unsandboxed; required
	// with SandboxEscalated and shown in the approval prompt.
	Justification string `json:"justification,omitempty"`
}

// TerminalResult is the outcome of [RunTerminal], sent back to the model as
// the tool result: [protocol.TerminalResult], the wire shape clients decode
// from tool.completed.
type TerminalResult = protocol.TerminalResult

// TerminalOptions configures [RunTerminal].
type TerminalOptions struct {
	// Cwd is the working directory; empty means the daemon's own.
	Cwd string
	// Timeout bounds the run time; zero or negative means DefaultTerminalTimeout.
	Timeout time.Duration
	// OutputLimit caps Output in bytes (head and tail kept, marker and notes
	// excluded); zero or negative means DefaultOutputLimit.
	OutputLimit int
	// EnvExclude lists glob patterns (path.Match, case-insensitive) of
	// environment variable names not passed to the command; nil passes the
	// daemon's whole environment. The daemon uses terminal.env_exclude
	// (default DefaultEnvExclude).
	EnvExclude []string
	// OnOutput, if not nil, receives the output as it arrives, in valid
	// UTF-8 chunks, for live display. It is called from another goroutine,
	// one call at a time, and never after RunTerminal returns. It should
	// return quickly: a slow OnOutput slows the command's writes.
	OnOutput func(chunk string)
	// OnStart, if not nil, is called once the shell's process exists, with
	// its process group id (= its pid), but before the command runs: the
	// shell waits on a gate until OnStart returned nil. The daemon records
	// the group's identity there, so that a later boot can kill what a
	// crashed daemon left running (see Identify and KillGroupIfSame), and
	// a command never runs unrecorded: if OnStart returns an error, or the
	// daemon dies first, the command does not run and RunTerminal returns
	// an error wrapping ErrNotStarted.
	OnStart func(pgid int) error
	// Env, when not nil, is the command's environment (see AllowedEnv)
	// instead of the daemon's less EnvExclude; the non-interactive
	// variables, MarkerEnv and, when sandboxed, TMPDIR are added to it.
	Env []string
	// Sandbox, when not nil and its mode is not off, confines the command
	// (see package sandbox): RunTerminal fills its Cwd, TempDir (a private
	// directory made for the command, TMPDIR, removed afterwards) and
	// Gate. The result's Sandbox says which sandbox applied.
	Sandbox *sandbox.Spec
	// Prestarts, when not nil and the command is sandboxed, supplies a
	// helper pre-started for this spec and cwd (see Prestarts) instead of
	// starting one, and pre-starts the next once the command ended.
	Prestarts *Prestarts
	// Marker is the command's MarkerEnv value; empty makes a fresh one. A
	// caller that records the command's identity passes its own
	// (NewMarker): reading it back from /proc right after the start can
	// find the environment not yet in place.
	Marker string
}

// ProcessIdentity names a process across a daemon restart: PID (a terminal
// command's process group id), the kernel's BootID, the process's
// StartTicks (start time in clock ticks since boot), its Session id and
// Marker, the value of MarkerEnv in its environment (unique per command,
// inherited by everything the command starts). A pid alone may be reused by
// an unrelated process; these together may not.
type ProcessIdentity struct {
	PID        int    `json:"pid"`
	BootID     string `json:"boot_id"`
	StartTicks uint64 `json:"start_ticks"`
	Session    int    `json:"session"`
	Marker     string `json:"marker,omitempty"`
}

// MarkerEnv is the environment variable that RunTerminal sets, to a random
// value per command, in every command's environment. Processes the command
// starts inherit it, which is how KillGroupIfSame tells the command's
// leftovers from an unrelated process group that reused its id.
const MarkerEnv = "SESSIOND_TOOL_RUN"

// NewMarker returns a fresh value for MarkerEnv: 128 random bits in hex.
func NewMarker() string {
	b := make([]byte, 16)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

var errTimedOut = errors.New("terminal command timed out")

// ErrNotStarted is wrapped by RunTerminal's error when the command did not
// run because TerminalOptions.OnStart failed.
var ErrNotStarted = errors.New("command not started")

// gateScript is the shell that runs a command once the daemon opened the
// gate: it waits for a line on fd 3 (EOF, from an error or a dead daemon,
// exits 125 without running anything), then replaces itself, with fd 3
// closed, by "/bin/sh -c command" (same pid, so the recorded identity
// stays the command's).
const gateScript = `IFS= read -r _ <&3 || exit 125; exec 3<&- /bin/sh -c "$1"`

// RunTerminal runs "/bin/sh -c command" in opt.Cwd, in its own process
// group, with stdin from /dev/null and a non-interactive environment
// (GIT_EDITOR=true, GIT_TERMINAL_PROMPT=0, PAGER=cat, GIT_PAGER=cat,
// DEBIAN_FRONTEND=noninteractive on top of opt.Env, or else of the daemon's
// environment less the variables matching opt.EnvExclude). With
// opt.Sandbox it runs confined by the sandbox helper (see package
// sandbox), with TMPDIR set to a private directory removed afterwards.
//
// When the shell exits, what it left in its process group gets up to
// exitGrace (1 s) to finish writing and exit by itself (a tee behind a
// process substitution, a pipeline's last writer); whatever is still
// running then, such as a background job, is killed. When the timeout expires the whole group is killed with SIGKILL
// and the result has TimedOut set, ExitCode -1 and a note in Output; that
// is not an error. When ctx is cancelled (an interrupt) the whole group is
// killed too, and RunTerminal returns the partial result (ExitCode -1)
// together with ctx's error. If the shell cannot be started (for example
// Cwd does not exist) it returns ExitCode -1 and the start error. A non-zero
// exit status is reported in ExitCode, not as an error.
//
// Processes that move themselves to another process group or session
// (setsid, daemons) are outside the group and are not killed; RunTerminal
// stops waiting for their output a short while after the shell exits.
func RunTerminal(ctx context.Context, command string, opt TerminalOptions) (TerminalResult, error) {
	timeout := opt.Timeout
	if timeout <= 0 {
		timeout = DefaultTerminalTimeout
	}
	limit := opt.OutputLimit
	if limit <= 0 {
		limit = DefaultOutputLimit
	}
	res := TerminalResult{ExitCode: -1}
	if err := ctx.Err(); err != nil {
		return res, err
	}

	runCtx, cancel := context.WithTimeoutCause(ctx, timeout, errTimedOut)
	defer cancel()

	env := commandEnv(os.Environ(), opt.EnvExclude)
	if opt.Env != nil {
		env = append(slices.Clone(opt.Env), nonInteractiveEnv...)
	}
	marker := opt.Marker
	if marker == "" {
		marker = NewMarker()
	}
	sandboxed := opt.Sandbox != nil && opt.Sandbox.Policy.Mode != sandbox.ModeOff
	// Once a command that started has ended, the next command's helper
	// is pre-started: its exec then runs while the model writes its next
	// reply, not alongside the command (measured: on two busy cores an
	// exec of the image beside a short command adds 3–4 ms to it).
	prestartNext := func() {}
	if sandboxed && opt.Prestarts != nil {
		key := prestartKey(opt.Sandbox, opt.Cwd)
		prestartNext = func() { opt.Prestarts.prestart(key, opt.Cwd) }
		if p := opt.Prestarts.take(key); p != nil {
			if _, err := os.Stat(cmdDir(opt.Cwd)); err == nil {
				return runPrestarted(ctx, runCtx, p, command, opt, timeout, limit, append(env, MarkerEnv+"="+marker), prestartNext)
			}
			p.Discard() // the cwd is gone: the cold start says so
		}
	}

	pr, pw, err := os.Pipe()
	if err != nil {
		return res, fmt.Errorf("tools: terminal output pipe: %w", err)
	}
	defer pr.Close()

	cmd := exec.CommandContext(runCtx, "/bin/sh", "-c", command)
	var gate *os.File // the write end of the gate, when OnStart is set
	if opt.OnStart != nil {
		gr, gw, err := os.Pipe()
		if err != nil {
			pw.Close()
			return res, fmt.Errorf("tools: terminal gate pipe: %w", err)
		}
		defer gr.Close()
		defer gw.Close()
		cmd = exec.CommandContext(runCtx, "/bin/sh", "-c", gateScript, "/bin/sh", command)
		cmd.ExtraFiles = []*os.File{gr} // fd 3
		gate = gw
	}
	if sandboxed {
		sb, tmp, err := sandboxCommand(runCtx, command, opt, gate != nil)
		if err != nil {
			pw.Close()
			return res, err
		}
		defer os.RemoveAll(tmp)
		sb.ExtraFiles = cmd.ExtraFiles
		cmd = sb
		env = append(env, "TMPDIR="+tmp)
		res.Sandbox = opt.Sandbox.Policy.String()
	}
	cmd.Dir = opt.Cwd
	cmd.Env = append(env, MarkerEnv+"="+marker)
	cmd.Stdin = nil // /dev/null
	cmd.Stdout = pw
	cmd.Stderr = pw
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	// reaped is set once the shell is known to have exited and is about to
	// be reaped: from then on its id may be reused, so Cancel must not kill
	// by that id any more (RunTerminal has killed the group already).
	var mu sync.Mutex
	reaped := false
	cmd.Cancel = func() error {
		mu.Lock()
		defer mu.Unlock()
		if reaped {
			return nil
		}
		return killGroup(cmd.Process.Pid)
	}
	cmd.WaitDelay = drainDelay

	start := time.Now()
	if err := cmd.Start(); err != nil {
		pw.Close()
		return res, fmt.Errorf("tools: start terminal command: %w", err)
	}
	pw.Close() // the children hold the only write ends now
	pgid := cmd.Process.Pid
	var startErr error
	if gate != nil {
		cmd.ExtraFiles[0].Close() // the child holds the read end now
		if startErr = opt.OnStart(pgid); startErr == nil {
			_, startErr = gate.Write([]byte("\n"))
		}
		gate.Close() // on error: EOF, and the gate exits 125 without running the command
	}
	if startErr == nil {
		defer prestartNext()
	}
	return finishTerminal(ctx, runCtx, cmd, pr, start, startErr, command, opt, timeout, limit, res, &mu, &reaped)
}

// runPrestarted runs command on p, a helper pre-started for opt.Sandbox
// and opt.Cwd: it fills the command's Spec as sandboxCommand does (a fresh
// temp directory, the registered homes read now), calls opt.OnStart with
// the helper's process group, then dispatches the command to it (its
// gate); from there on it is RunTerminal's cold path, with the
// interrupt and the timeout killing the group as exec.CommandContext's
// Cancel does there.
func runPrestarted(ctx, runCtx context.Context, p *sandbox.Prestarted, command string, opt TerminalOptions, timeout time.Duration, limit int, env []string, prestartNext func()) (TerminalResult, error) {
	res := TerminalResult{ExitCode: -1}
	pr := p.Output
	defer pr.Close()
	defer p.Release()
	spec, tmp, err := commandSpec(opt, false)
	if err != nil {
		p.Discard()
		return res, err
	}
	defer os.RemoveAll(tmp)
	res.Sandbox = opt.Sandbox.Policy.String()
	env = append(env, "TMPDIR="+tmp)
	cmd := p.Cmd
	pgid := cmd.Process.Pid
	var mu sync.Mutex
	reaped := false
	stop := context.AfterFunc(runCtx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !reaped {
			_ = killGroup(pgid)
		}
	})
	defer stop()
	start := time.Now()
	var startErr error
	if opt.OnStart != nil {
		startErr = opt.OnStart(pgid)
	}
	if startErr == nil {
		if startErr = p.Dispatch(sandbox.Dispatch{Spec: spec, Command: command, Env: env}); startErr == nil {
			defer prestartNext()
		}
	} else {
		p.Discard()
		return TerminalResult{ExitCode: -1}, fmt.Errorf("tools: %w: %w", ErrNotStarted, startErr)
	}
	return finishTerminal(ctx, runCtx, cmd, pr, start, startErr, command, opt, timeout, limit, res, &mu, &reaped)
}

// cmdDir is the directory a command starts in: dir, or the daemon's own
// when empty.
func cmdDir(dir string) string {
	if dir == "" {
		return "."
	}
	return dir
}

// finishTerminal waits for the started command cmd (its output on pr)
// and makes RunTerminal's result.
func finishTerminal(ctx, runCtx context.Context, cmd *exec.Cmd, pr *os.File, start time.Time, startErr error, command string, opt TerminalOptions, timeout time.Duration, limit int, res TerminalResult, mu *sync.Mutex, reaped *bool) (TerminalResult, error) {
	pgid := cmd.Process.Pid
	out := newCapture(limit, opt.OnOutput)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		out.readFrom(pr)
	}()

	// Kill the leftovers of the group (background jobs and the like) after
	// the shell exits but before it is reaped, while its id still pins the
	// group id; first give them exitGrace to finish by themselves.
	var waitErr error
	if waitExited(pgid) == nil {
		awaitGroup(runCtx, pgid, readDone, exitGrace)
		mu.Lock()
		_ = killGroup(pgid)
		*reaped = true
		mu.Unlock()
		waitErr = cmd.Wait()
	} else {
		waitErr = cmd.Wait()
		_ = killGroup(pgid)
	}

	drain := time.NewTimer(drainDelay)
	select {
	case <-readDone:
	case <-drain.C:
		pr.Close() // someone outside the group holds the pipe: stop reading
		<-readDone
	}
	drain.Stop()
	res.DurationMS = time.Since(start).Milliseconds()
	res.Output, res.Truncated = out.result()
	res.TotalBytes = out.total
	if startErr != nil {
		return TerminalResult{ExitCode: -1, DurationMS: res.DurationMS}, fmt.Errorf("tools: %w: %w", ErrNotStarted, startErr)
	}

	ps := cmd.ProcessState
	exited := ps != nil && ps.Exited()
	switch {
	case exited:
		res.ExitCode = ps.ExitCode()
		if res.Sandbox != "" && res.ExitCode != 0 && (sandboxBlocked(res.Output) || touchesProtected(command, opt.Sandbox)) {
			res.SandboxBlocked = true
			res.Note = blockedNote(res.Sandbox)
		}
	case ctx.Err() != nil:
		res.Output += "\n[interrupted: process group killed]"
		return res, ctx.Err()
	case errors.Is(context.Cause(runCtx), errTimedOut):
		res.TimedOut = true
		res.Output += fmt.Sprintf("\n[timed out after %s: process group killed]", timeout)
	case ps != nil:
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Output += fmt.Sprintf("\n[terminated by signal: %s]", ws.Signal())
		}
	default:
		return res, fmt.Errorf("tools: wait for terminal command: %w", waitErr)
	}
	return res, nil
}

// awaitGroup waits, at most grace, until the output pipe is closed
// (readDone) and no process of group pgid is alive (its exited leader,
// not yet reaped, does not count), or until ctx ends (an interrupt or the
// timeout: then exec's Cancel kills the group).
func awaitGroup(ctx context.Context, pgid int, readDone <-chan struct{}, grace time.Duration) {
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	select {
	case <-readDone:
	case <-deadline.C:
		return
	case <-ctx.Done():
		return
	}
	tick := time.NewTicker(graceTick)
	defer tick.Stop()
	for groupHasLive(pgid) {
		select {
		case <-tick.C:
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// killGroup sends SIGKILL to every process of process group pgid.
func killGroup(pgid int) error {
	if pgid <= 0 {
		return nil
	}
	err := syscall.Kill(-pgid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// capture keeps the head and the tail of a command's output within a byte
// limit, in valid UTF-8, without holding the rest: memory stays O(limit).
type capture struct {
	headCap int
	head    []byte
	tail    []byte // ring buffer of the latest bytes after the head filled
	tailPos int    // next write position in tail
	tailLen int    // bytes in tail
	full    bool   // head closed: everything further goes to tail
	clean   int64  // sanitized bytes seen
	total   int64  // raw bytes read
	carry   []byte // incomplete UTF-8 sequence at the end of the last read
	notify  func(string)
}

func newCapture(limit int, notify func(string)) *capture {
	headCap := limit / 2
	return &capture{
		headCap: headCap,
		head:    make([]byte, 0, headCap),
		tail:    make([]byte, limit-headCap),
		notify:  notify,
	}
}

// readFrom copies r into the capture until EOF or a read error.
func (c *capture) readFrom(r io.Reader) {
	buf := make([]byte, 32*1024)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			c.write(buf[:n])
		}
		if err != nil {
			break
		}
	}
	if len(c.carry) > 0 {
		c.emit(strings.ToValidUTF8(string(c.carry), "\uFFFD"))
		c.carry = nil
	}
}

// write takes raw bytes; an incomplete rune at the end waits for the next
// write, everything else is sanitized and stored.
func (c *capture) write(raw []byte) {
	c.total += int64(len(raw))
	data := raw
	if len(c.carry) > 0 {
		data = append(c.carry, raw...)
		c.carry = nil
	}
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				c.carry = append([]byte(nil), data[i:]...)
				data = data[:i]
			}
			break
		}
	}
	if len(data) > 0 {
		c.emit(strings.ToValidUTF8(string(data), "\uFFFD"))
	}
}

// emit stores a valid UTF-8 chunk and passes it to notify.
func (c *capture) emit(s string) {
	if s == "" {
		return
	}
	c.clean += int64(len(s))
	rest := s
	if !c.full {
		n := min(c.headCap-len(c.head), len(rest))
		for n > 0 && n < len(rest) && !utf8.RuneStart(rest[n]) {
			n--
		}
		c.head = append(c.head, rest[:n]...)
		rest = rest[n:]
		if rest != "" {
			c.full = true
		}
	}
	if size := len(c.tail); size > 0 && rest != "" {
		if len(rest) > size {
			rest = rest[len(rest)-size:]
		}
		for len(rest) > 0 {
			k := copy(c.tail[c.tailPos:], rest)
			rest = rest[k:]
			c.tailPos = (c.tailPos + k) % size
			c.tailLen = min(c.tailLen+k, size)
		}
	}
	if c.notify != nil {
		c.notify(s)
	}
}

// result assembles the capped output.
func (c *capture) result() (string, bool) {
	tail := make([]byte, 0, c.tailLen)
	if c.tailLen == len(c.tail) {
		tail = append(tail, c.tail[c.tailPos:]...)
		tail = append(tail, c.tail[:c.tailPos]...)
	} else {
		tail = append(tail, c.tail[:c.tailLen]...)
	}
	omitted := c.clean - int64(len(c.head)) - int64(len(tail))
	if omitted <= 0 {
		return string(c.head) + string(tail), false
	}
	// The tail may start inside a rune: drop the continuation bytes.
	for i := 0; i < utf8.UTFMax && len(tail) > 0 && !utf8.RuneStart(tail[0]); i++ {
		tail = tail[1:]
		omitted++
	}
	return string(c.head) + fmt.Sprintf("\n… [%d bytes omitted] …\n", omitted) + string(tail), true
}
