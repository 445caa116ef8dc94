package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// prestartShimArg runs the test binary as prestartShim.
const prestartShimArg = "__test-prestart-shim"

// testPrestarted makes the package's run helpers (run, runLoose,
// runStatus, runSetup and the attack tests that start commands
// themselves) run every command on a pre-started helper instead of a cold
// one: SESSIOND_TEST_PRESTART=1 go test ./sandbox/.
var testPrestarted = os.Getenv("SESSIOND_TEST_PRESTART") == "1"

// testCommand is s.Command, or with testPrestarted a shim that runs
// command on a pre-started helper: it waits for the gate (when s.Gate),
// pre-starts a helper in its cwd, dispatches s, command and its own
// environment to it, copies its output to its stdout and returns its
// status.
func testCommand(ctx context.Context, s Spec, command string) (*exec.Cmd, error) {
	cmd, err := s.Command(ctx, command)
	if err != nil || !testPrestarted {
		return cmd, err
	}
	js, _ := json.Marshal(s)
	cmd.Args = []string{helperPath, prestartShimArg, string(js), command}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The helper is in the shim's process group: a cancelled command is
	// killed with it, as the daemon kills a helper's group.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return cmd, nil
}

func init() {
	if len(os.Args) == 4 && os.Args[1] == prestartShimArg {
		os.Exit(prestartShim(os.Args[2], os.Args[3]))
	}
}

func prestartShim(specJSON, command string) int {
	var s Spec
	if err := json.Unmarshal([]byte(specJSON), &s); err != nil {
		return ExitSetupFailed
	}
	if s.Gate {
		gate := os.NewFile(3, "gate")
		if _, err := bufio.NewReader(gate).ReadString('\n'); err != nil {
			return ExitGateClosed
		}
		gate.Close()
	}
	cwd, _ := os.Getwd()
	p, err := prestart(helperPath, cwd, false)
	if err != nil {
		os.Stderr.WriteString("sessiond sandbox: " + err.Error() + "\n")
		return ExitSetupFailed
	}
	defer p.Release()
	copied := make(chan struct{})
	go func() { io.Copy(os.Stdout, p.Output); close(copied) }()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	go func() {
		for sig := range sigs {
			p.Cmd.Process.Signal(sig)
		}
	}()
	if err := p.Dispatch(Dispatch{Spec: s, Command: command, Env: os.Environ()}); err != nil {
		p.Discard()
		return ExitSetupFailed
	}
	err = p.Cmd.Wait()
	<-copied
	return exitStatus(err)
}
