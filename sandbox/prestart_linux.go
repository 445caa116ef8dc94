package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Arguments of a pre-started helper (see Prestart): stage 1, and stage 2
// when not root.
const (
	prestartArg       = "__sandbox-exec-prestart"
	prestartStage2Arg = "__sandbox-exec-prestart-userns"
)

// Dispatch is what a pre-started helper receives on fd 3, as one line of
// JSON, once its command may run: the command's complete Spec (with its
// fresh TempDir and the registered homes read at dispatch in Protected),
// the command line, and the environment of /bin/sh (its $PATH is also
// what the view's $PATH roots come from).
type Dispatch struct {
	Spec    Spec     `json:"spec"`
	Command string   `json:"command"`
	Env     []string `json:"env"`
}

// Prestarted is a sandbox helper started ahead of its command: the exec
// of this image, its process group, new PID and IPC namespaces (and, not
// root, stage 2 in its own user namespace) are done; it waits on fd 3 for
// one Dispatch line. Only then does it do what a helper started by
// Spec.Command does: it makes its mount namespace (on the thread that
// builds the view, so the view is built from the mounts and files as they
// are at dispatch), plans and builds the view, confines a thread and
// forks /bin/sh as PID 1 of its namespace. A Prestarted runs exactly one
// command.
//
// It dies with the daemon: it is forked from an OS thread that lives
// until Release (Pdeathsig SIGKILL fires when that thread ends); at
// dispatch the helper clears its Pdeathsig, so a command outlives a
// crashed daemon exactly as one started by Spec.Command does.
type Prestarted struct {
	// Cmd is the started helper; its Process.Pid is the command's process
	// group id. The caller reaps it with Cmd.Wait (Discard does), then
	// calls Release.
	Cmd *exec.Cmd
	// Output is the read end of the pipe that is the helper's (and its
	// command's) stdout and stderr; the caller closes it.
	Output *os.File

	line     *os.File      // write end of fd 3
	released chan struct{} // closed by Release: the forking thread may end
}

// Prestart starts a helper in directory cwd (the session's cwd, as
// Spec.Command's caller sets Dir) that waits for its Dispatch. Its
// environment is empty until the dispatch; stdin is /dev/null.
// It fails with ErrPrestartUnsupported, starting nothing, when such a
// helper could not leave the daemon's mounts at dispatch (see
// prestartSupported): the caller runs its commands cold.
func Prestart(cwd string) (*Prestarted, error) {
	if err := prestartSupported(); err != nil {
		return nil, err
	}
	return prestart(helperPath, cwd, true)
}

// ErrPrestartUnsupported is Prestart's refusal in a daemon whose helpers
// would lack CAP_SYS_CHROOT: run as root with that capability dropped (a
// container's or a unit's capability bounding set, SECBIT_NOROOT). A cold
// helper does not need it.
var ErrPrestartUnsupported = errors.New("sandbox: pre-started helpers need CAP_SYS_CHROOT, which this daemon's helpers would not have; commands start cold")

// prestartSupported says whether a pre-started helper would have
// CAP_SYS_CHROOT when its main thread chroots into the view at dispatch
// (initMain). Not root, stage 2 gets it in its own user namespace. As
// root, the helper's capabilities after its exec are its ambient set or,
// unless SECBIT_NOROOT, the inheritable and bounding sets, capped by the
// permitted set under no_new_privs: the daemon's permitted set must hold
// CAP_SYS_CHROOT and one of those must pass it on. Read once: a daemon
// does not change its capabilities.
var prestartSupported = sync.OnceValue(func() error {
	if os.Geteuid() != 0 {
		return nil
	}
	const chroot = unix.CAP_SYS_CHROOT
	ambient, err := unix.PrctlRetInt(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_IS_SET, chroot, 0, 0)
	if err != nil {
		ambient = 0 // a kernel without ambient capabilities
	}
	bounding, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, chroot, 0, 0, 0)
	if err != nil {
		return fmt.Errorf("%w (read the bounding set: %v)", ErrPrestartUnsupported, err)
	}
	bits, err := unix.PrctlRetInt(unix.PR_GET_SECUREBITS, 0, 0, 0, 0)
	if err != nil {
		return fmt.Errorf("%w (read the securebits: %v)", ErrPrestartUnsupported, err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("%w (capget: %v)", ErrPrestartUnsupported, err)
	}
	has := func(set uint32) bool { return set&(1<<chroot) != 0 }
	const secbitNoRoot = 1 << 0 // SECURE_NOROOT
	if has(data[0].Permitted) && (ambient == 1 || (bits&secbitNoRoot == 0 && (bounding == 1 || has(data[0].Inheritable)))) {
		return nil
	}
	return ErrPrestartUnsupported
})

// prestart is Prestart with the helper's program (helperPath but in
// benchmarks of another image) and, without ownGroup, in the caller's
// process group (tests whose shim stands for the helper).
func prestart(program, cwd string, ownGroup bool) (*Prestarted, error) {
	lr, lw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: pre-start: %w", err)
	}
	or, ow, err := os.Pipe()
	if err != nil {
		lr.Close()
		lw.Close()
		return nil, fmt.Errorf("sandbox: pre-start: %w", err)
	}
	cmd := exec.Command(program, prestartArg)
	cmd.Dir = cwd
	cmd.Env = []string{}
	cmd.Stdout, cmd.Stderr = ow, ow
	cmd.ExtraFiles = []*os.File{lr}
	// The mount namespace is made at dispatch (see Prestarted); the PID
	// and IPC namespaces are empty until then.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: ownGroup, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC
	}
	p := &Prestarted{Cmd: cmd, Output: or, line: lw, released: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Never unlocked: Pdeathsig fires when the forking thread ends,
		// which it does with this goroutine, after Release.
		runtime.LockOSThread()
		err := cmd.Start()
		started <- err
		if err == nil {
			<-p.released
		}
	}()
	err = <-started
	lr.Close()
	ow.Close()
	if err != nil {
		lw.Close()
		or.Close()
		return nil, fmt.Errorf("sandbox: pre-start: %w", err)
	}
	return p, nil
}

// Waiting reports whether the helper still lives, waiting for its
// dispatch (it has not exited; a crashed or killed one has). It does not
// reap it.
func (p *Prestarted) Waiting() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, p.Cmd.Process.Pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if err != nil {
		return false
	}
	// No child in a waitable state leaves info zeroed: si_pid, the first
	// field of the union after si_signo, si_errno and si_code (aligned to
	// a pointer), is 0.
	off := uintptr(12)
	if unsafe.Sizeof(uintptr(0)) == 8 {
		off = 16
	}
	return *(*int32)(unsafe.Add(unsafe.Pointer(&info), off)) == 0
}

// Dispatch validates d and sends it: from then on the helper builds the
// view and runs d.Command. An error means nothing was sent (a bad spec),
// or the helper is gone (then its Cmd.Wait tells how it ended); either
// way its command does not run.
func (p *Prestarted) Dispatch(d Dispatch) error {
	if d.Spec.Policy.Mode == ModeOff {
		return errors.New("sandbox: mode off has nothing to enforce")
	}
	if err := d.Spec.Policy.Validate(); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	d.Spec.Gate = false
	js, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	_, err = p.line.Write(append(js, '\n'))
	p.line.Close()
	if err != nil {
		return fmt.Errorf("sandbox: the pre-started helper is gone: %w", err)
	}
	return nil
}

// Discard ends an undispatched helper: it closes fd 3's write end (the
// helper exits ExitGateClosed without running anything), kills its
// process group, reaps it and releases it. It closes Output.
func (p *Prestarted) Discard() {
	p.line.Close()
	_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
	_ = p.Cmd.Wait()
	p.Output.Close()
	p.Release()
}

// Release lets the thread that forked the helper end; call it once the
// helper is reaped (Cmd.Wait returned). It may be called more than once.
func (p *Prestarted) Release() {
	select {
	case <-p.released:
	default:
		close(p.released)
	}
}

// prestartMain is a pre-started helper (stage 2 when not root): it waits
// for its Dispatch on fd 3 (EOF: ExitGateClosed, nothing ran), clears its
// Pdeathsig, takes the dispatched environment as its own and runs the
// helper's initMain in a mount namespace it makes then.
func prestartMain(stage2 bool) int {
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(CommandOOMScoreAdj)), 0); err != nil {
		fmt.Fprintf(os.Stderr, "sessiond sandbox: oom_score_adj: %v\n", err)
		return ExitSetupFailed
	}
	if !stage2 && os.Geteuid() != 0 {
		return prestartUserNamespaced()
	}
	line, err := readDispatch()
	if err != nil {
		return ExitGateClosed
	}
	var d Dispatch
	if err := json.Unmarshal(line, &d); err != nil {
		fmt.Fprintf(os.Stderr, "sessiond sandbox: bad dispatch: %v\n", err)
		return ExitSetupFailed
	}
	os.Clearenv()
	for _, kv := range d.Env {
		if k, v, ok := cutEnv(kv); ok {
			os.Setenv(k, v)
		}
	}
	return initMain(d.Spec, d.Command, true)
}

// readDispatch reads the one line on fd 3, closes it and clears this
// process's Pdeathsig: from here on the helper is a command's, which
// outlives a crashed daemon as one started by Spec.Command does.
func readDispatch() ([]byte, error) {
	gate := os.NewFile(3, "dispatch")
	line, err := bufio.NewReaderSize(gate, 64<<10).ReadBytes('\n')
	gate.Close()
	if err != nil {
		return nil, err
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, 0, 0, 0, 0); err != nil {
		return nil, err
	}
	return line, nil
}

// prestartUserNamespaced is stage 1 of a pre-started helper when not
// root: it starts stage 2 in new user, PID and IPC namespaces (see
// userNamespaced; its mount namespace is made at dispatch) that dies with
// stage 1 until dispatched, then relays the dispatch to it and returns its
// exit status.
func prestartUserNamespaced() int {
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sessiond sandbox: user namespace: %v\n", err)
		return ExitSetupFailed
	}
	cmd := exec.Command(helperPath, prestartStage2Arg)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = userNSAttr(syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC)
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	// And CAP_SYS_CHROOT: its main thread leaves the daemon's mounts for
	// the view (see initMain); the confined thread drops it with the rest.
	cmd.SysProcAttr.AmbientCaps = append(cmd.SysProcAttr.AmbientCaps, unix.CAP_SYS_CHROOT)
	runtime.LockOSThread() // never unlocked: this thread forks stage 2 and lives as long as this process
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "sessiond sandbox: user namespace: %v\n", err)
		return ExitSetupFailed
	}
	r.Close()
	line, err := readDispatch()
	if err == nil {
		_, err = w.Write(line)
	}
	w.Close() // on error: EOF, and stage 2 exits ExitGateClosed
	status := exitStatus(cmd.Wait())
	if err != nil {
		return ExitGateClosed
	}
	return status
}

func cutEnv(kv string) (string, string, bool) {
	for i := 1; i < len(kv); i++ { // a name is never empty; "=C:" style keys are not Linux's
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return "", "", false
}
