//go:build !linux

package sandbox

import (
	"context"
	"errors"
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
