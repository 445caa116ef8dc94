//go:build !linux

package tools

import "errors"

// waitExited is only implemented on Linux; elsewhere RunTerminal kills the
// leftovers of the process group right after reaping the shell.
func waitExited(pid int) error { return errors.ErrUnsupported }
