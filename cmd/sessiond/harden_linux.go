package main

import "syscall"

// harden makes the daemon's process non-dumpable (prctl PR_SET_DUMPABLE 0):
// other processes of the same user — terminal commands the model runs
// among them — can no longer read its /proc/PID/environ (OPENAI_API_KEY),
// memory or descriptors, or attach a debugger, and no core dump is
// written. Children get dumpable back when they exec. Root is not stopped.
func harden() error {
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// dumpable reports PR_GET_DUMPABLE (for tests).
func dumpable() (bool, error) {
	r, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_GET_DUMPABLE, 0, 0)
	if errno != 0 {
		return false, errno
	}
	return r != 0, nil
}
