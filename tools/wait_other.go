//go:build !linux

package tools

import "errors"

// waitExited is only implemented on Linux; elsewhere RunTerminal kills the
// leftovers of the process group right after reaping the shell.
func waitExited(pid int) error { return errors.ErrUnsupported }

// groupHasLive is only implemented on Linux (it is never reached elsewhere:
// waitExited fails first).
func groupHasLive(pgid int) bool { return false }
