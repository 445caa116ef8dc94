package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	seccomp "github.com/elastic/go-seccomp-bpf"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// HelperArg is the hidden first argument that turns any binary importing
// this package into the sandbox's exec helper (see the package doc).
const HelperArg = "__sandbox-exec"

// helperPath is the program a sandboxed command is started as: the
// running image itself. In the forked child the kernel resolves
// /proc/self/exe to the inode this process was started from, whatever has
// since been renamed over or into its path (a command can write the
// directory the binary lies in, e.g. bin/ of a repository it works in);
// writing into that inode fails with ETXTBSY while it runs. Never a path
// name: whoever can rename in its directory would choose the helper, which
// runs with the daemon's privileges before anything is confined.
const helperPath = "/proc/self/exe"

// Exit statuses of the helper itself, before /bin/sh runs.
const (
	// ExitGateClosed: the gate on fd 3 closed without a line; nothing ran.
	ExitGateClosed = 125
	// ExitSetupFailed: the sandbox could not be set up; nothing ran. The
	// reason is on stderr, prefixed "sessiond sandbox: ".
	ExitSetupFailed = 126
)

// CommandOOMScoreAdj is the oom_score_adj of every sandboxed command and
// what it starts (the highest: killed first under memory pressure).
const CommandOOMScoreAdj = 1000

// MinLandlockABI is the lowest Landlock ABI the sandbox accepts: 6 adds
// signal and abstract-socket scoping, without which a command could kill
// the daemon.
const MinLandlockABI = 6

// Command returns the *exec.Cmd that runs "/bin/sh -c command" confined
// by s: program this running image (/proc/self/exe), arguments HelperArg, the JSON of s and
// command, and a SysProcAttr with its own process group and, as root, a
// private mount namespace (not root, the helper makes its own user and
// mount namespaces). The caller sets Dir, Env, Stdin, Stdout,
// Stderr and, when s.Gate, ExtraFiles[0] (fd 3), and may add to
// SysProcAttr.
func (s Spec) Command(ctx context.Context, command string) (*exec.Cmd, error) {
	if s.Policy.Mode == ModeOff {
		return nil, errors.New("sandbox: mode off has nothing to enforce")
	}
	if err := s.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	js, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	cmd := exec.CommandContext(ctx, helperPath, HelperArg, string(js), command)
	cmd.SysProcAttr = sysProcAttr()
	return cmd, nil
}

// sysProcAttr is the daemon's side: the helper gets its own process group
// and, as root, private mount and IPC namespaces (no SysV or POSIX IPC
// object of the user's outside, none left behind) and a PID namespace of its own,
// in which it is init (see initMain). Not root, the helper starts in
// the daemon's namespaces and makes its own (see userNamespaced).
func sysProcAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if os.Geteuid() == 0 {
		a.Cloneflags = syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC
	}
	return a
}

// stage2Arg marks the helper's second stage, when not root: started by the
// first in a user and a mount namespace of its own.
const stage2Arg = "__sandbox-exec-userns"

// userNamespaced runs the rest of the helper (initMain: the view,
// Landlock, seccomp, the shell) in a child in new user, mount and PID namespaces that map the caller's
// uid and gid to themselves, with the capabilities to set up its mounts
// kept across its exec as ambient capabilities (it drops them all before
// /bin/sh). The child stays in this process group; its exit status is
// returned as this process's (128+N for a signal N). The daemon, being
// non-dumpable, cannot give a child namespaces of its own: writing a
// non-dumpable child's uid_map needs root, so this freshly executed (and
// so dumpable) helper does it.
func userNamespaced(s Spec, command string) int {
	s.Gate = false
	js, _ := json.Marshal(s)
	cmd := exec.Command(helperPath, stage2Arg, string(js), command)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = userNSAttr(syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC)
	return exitStatus(cmd.Run())
}

// userNSAttr is stage 2's SysProcAttr: the namespaces in clone, the
// caller's uid and gid mapped to themselves, CAP_SYS_ADMIN and
// CAP_SETPCAP kept across the exec as ambient capabilities.
func userNSAttr(clone uintptr) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Cloneflags:                 clone,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: os.Geteuid(), HostID: os.Geteuid(), Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: os.Getegid(), HostID: os.Getegid(), Size: 1}},
		GidMappingsEnableSetgroups: false,
		AmbientCaps:                []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP},
	}
}

// exitStatus is the exit status of stage 2 as stage 1 returns it (128+N
// for a signal N; ExitSetupFailed when it could not be started or waited
// for).
func exitStatus(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	default:
		fmt.Fprintf(os.Stderr, "sessiond sandbox: user namespace: %v\n", err)
		return ExitSetupFailed
	}
}

// Probe checks that this kernel and process can enforce a sandbox: a
// Landlock ABI of at least MinLandlockABI, seccomp, and a helper run that
// sets up namespaces, mounts, Landlock and seccomp for a trivial command.
// The error says what is missing; nil means commands can be sandboxed.
func Probe() error {
	abi, err := ll.LandlockGetABIVersion()
	if err != nil {
		//lint:ignore ST1005 Landlock is a proper noun
		return fmt.Errorf("Landlock is not available: %v", err)
	}
	if abi < MinLandlockABI {
		//lint:ignore ST1005 Landlock is a proper noun
		return fmt.Errorf("Landlock ABI %d is too old: %d or later is needed (signal scoping, Linux 6.12)", abi, MinLandlockABI)
	}
	if !seccomp.Supported() {
		return errors.New("seccomp is not available")
	}
	tmp, err := os.MkdirTemp("", "sessiond-probe-")
	if err != nil {
		return fmt.Errorf("temp directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	spec := Spec{Policy: Policy{Mode: ModeReadOnly}, Cwd: tmp, TempDir: tmp, Protected: []string{tmp}, CoveredFiles: []string{"x"}}
	cmd, err := spec.Command(ctx, "exit 0")
	if err != nil {
		return err
	}
	cmd.Dir = tmp
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out.String()), "sessiond sandbox: "))
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("the sandbox helper failed: %s", msg)
	}
	return nil
}

func init() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case HelperArg, stage2Arg:
		os.Exit(helperMain(os.Args[2:], os.Args[1] == stage2Arg))
	case prestartArg, prestartStage2Arg:
		os.Exit(prestartMain(os.Args[1] == prestartStage2Arg))
	}
}

// exitGrace is how long, after /bin/sh exits, the helper lets what it
// left in the PID namespace finish by itself (a tee behind a pipeline, a
// last writer) before it exits and the kernel kills the rest. It ends
// early when nothing else lives.
const exitGrace = time.Second

// reaped is one child that wait4 collected.
type reaped struct {
	pid int
	ws  unix.WaitStatus
}

// initMain is PID 1 of the command's PID namespace. It builds the view and
// confines one OS thread of its own (confine: mounts, /proc, no
// capability, Landlock, seccomp), makes itself non-dumpable, forks /bin/sh
// -c command from that thread — the shell inherits the confinement, and
// no second program image runs in between — and lets the thread end.
// Then it reaps every process orphaned into the namespace, forwards
// SIGTERM, SIGINT, SIGHUP and SIGQUIT to the shell, and when the shell has
// exited waits at most exitGrace for the rest to end, then returns the
// shell's status (128+N for a signal N). Its exit makes the kernel kill
// whatever is left in the namespace (setsid and double-forked processes
// too), as does the daemon's SIGKILL of the helper's process group.
//
// The confined thread is not the main one and ends once the shell is
// started: no thread of the helper stays in the command's Landlock
// domain, so the command can neither signal nor trace it (Landlock's
// scoping), and being non-dumpable keeps its memory, environment,
// descriptors and root out of /proc for a command without CAP_SYS_PTRACE
// even while that thread lives.
//
// With ownMountNS (a pre-started helper, see Prestarted) the confined
// thread first unshares a mount namespace of its own, a copy of the
// mounts as they are now, and builds the view there; the shell forked
// from it inherits that namespace. Before the fork the main thread moves
// the root of the other threads (still in the daemon's mount namespace)
// to the view's root, so that the command's /proc/1/mountinfo lists no
// mount of the daemon's.
func initMain(s Spec, command string, ownMountNS bool) int {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	type started struct {
		pid int
		err error
	}
	ch := make(chan started, 1)
	viewRoot, joined := make(chan int, 1), make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine, and its
		// confinement with it. Landlock, capabilities, no_new_privs and
		// seccomp are per thread; syscall.ForkExec clones the calling
		// thread, so the shell gets all of it. The runtime makes no new
		// thread from a locked one.
		runtime.LockOSThread()
		if ownMountNS {
			// CLONE_NEWNS implies CLONE_FS: this thread alone gets the new
			// namespace, root and cwd.
			if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
				ch <- started{err: fmt.Errorf("mount namespace: %w", err)}
				return
			}
		}
		if err := confine(s); err != nil {
			ch <- started{err: err}
			return
		}
		if ownMountNS {
			// This process's other threads are still in the daemon's
			// mount namespace, and /proc/PID/mountinfo (no ptrace access
			// needed) would list every mount of it to the command, whose
			// PID 1 this process is: the main thread moves their root
			// (their shared fs) into the view before the shell exists.
			fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				ch <- started{err: fmt.Errorf("view root: %w", err)}
				return
			}
			viewRoot <- fd
			if err := <-joined; err != nil {
				ch <- started{err: fmt.Errorf("leave the daemon's mounts: %w", err)}
				return
			}
		}
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			ch <- started{err: fmt.Errorf("non-dumpable: %w", err)}
			return
		}
		pid, err := syscall.ForkExec("/bin/sh", []string{"/bin/sh", "-c", command}, &syscall.ProcAttr{
			Env:   os.Environ(),
			Files: []uintptr{0, 1, 2},
		})
		if err != nil {
			err = fmt.Errorf("start the command: %w", err)
		}
		ch <- started{pid, err}
	}()
	var st started
	select {
	case fd := <-viewRoot:
		// On the main thread (locked to it during init): the root and
		// cwd of every thread but the confined one become the view's
		// root, so their mountinfo shows no mount of the daemon's.
		err := unix.Fchdir(fd)
		if err == nil {
			err = unix.Chroot(".")
		}
		unix.Close(fd)
		joined <- err
		st = <-ch
	case st = <-ch:
	}
	if st.err != nil {
		fmt.Fprintf(os.Stderr, "sessiond sandbox: %v\n", st.err)
		return ExitSetupFailed
	}
	sh := st.pid
	children := make(chan reaped, 16)
	go func() { // the only waiter: every child of init, the shell included
		defer close(children)
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, 0, nil)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return // ECHILD: nothing else lives in the namespace
			}
			children <- reaped{pid, ws}
		}
	}()
	status := -1
	var grace <-chan time.Time
	for {
		select {
		case sig := <-sigs:
			if status >= 0 {
				return status // told to stop during the grace: stop now
			}
			_ = syscall.Kill(sh, sig.(syscall.Signal))
		case c, ok := <-children:
			if !ok {
				if status < 0 {
					return ExitSetupFailed
				}
				return status
			}
			if c.pid != sh {
				continue
			}
			switch {
			case c.ws.Exited():
				status = c.ws.ExitStatus()
			case c.ws.Signaled():
				status = 128 + int(c.ws.Signal())
			default:
				continue
			}
			t := time.NewTimer(exitGrace)
			defer t.Stop()
			grace = t.C
		case <-grace:
			return status
		}
	}
}

// helperMain is the exec helper; it returns the exit status of the
// helper: the shell's (128+N for a signal N), ExitGateClosed or
// ExitSetupFailed.
func helperMain(args []string, stage2 bool) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "sessiond sandbox: usage: "+HelperArg+" SPEC COMMAND")
		return ExitSetupFailed
	}
	var s Spec
	if err := json.Unmarshal([]byte(args[0]), &s); err != nil {
		fmt.Fprintf(os.Stderr, "sessiond sandbox: bad spec: %v\n", err)
		return ExitSetupFailed
	}
	// The command and all it starts are the OOM killer's first choice,
	// before the daemon, whose turn would be left unknown.
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(CommandOOMScoreAdj)), 0); err != nil {
		fmt.Fprintf(os.Stderr, "sessiond sandbox: oom_score_adj: %v\n", err)
		return ExitSetupFailed
	}
	if s.Gate {
		gate := os.NewFile(3, "gate")
		if _, err := bufio.NewReader(gate).ReadString('\n'); err != nil {
			return ExitGateClosed
		}
		gate.Close()
	}
	if !stage2 && os.Geteuid() != 0 {
		return userNamespaced(s, args[1])
	}
	return initMain(s, args[1], false)
}
