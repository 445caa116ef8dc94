//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
)

// HelperArg is the hidden first argument of the exec helper (Linux only).
const HelperArg = "__sandbox-exec"

// Command is not available on this system.
func (s Spec) Command(ctx context.Context, command string) (*exec.Cmd, error) {
	return nil, Probe()
}

// Probe reports that this system has no sandbox.
func Probe() error {
	return errors.New("no sandbox on " + runtime.GOOS + ": Landlock, seccomp and mount namespaces are Linux features")
}

// Dispatch is a pre-started helper's command (Linux only).
type Dispatch struct {
	Spec    Spec     `json:"spec"`
	Command string   `json:"command"`
	Env     []string `json:"env"`
}

// Prestarted is a pre-started helper (Linux only).
type Prestarted struct {
	Cmd    *exec.Cmd
	Output *os.File
}

// Prestart is not available on this system.
func Prestart(cwd string) (*Prestarted, error) { return nil, Probe() }

// Waiting is false: there is no pre-started helper here.
func (p *Prestarted) Waiting() bool { return false }

// Dispatch is not available on this system.
func (p *Prestarted) Dispatch(d Dispatch) error { return Probe() }

// Discard does nothing here.
func (p *Prestarted) Discard() {}

// Release does nothing here.
func (p *Prestarted) Release() {}
