package tools

import (
	"syscall"
	"unsafe"
)

// pPID is waitid's P_PID id type on Linux.
const pPID = 1

// waitExited blocks until process pid has exited without reaping it
// (waitid with WNOWAIT). While the exited process is not reaped its id
// cannot be reused, so its process group can be killed afterwards without
// any risk of hitting an unrelated group that got the same id.
func waitExited(pid int) error {
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info)), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		switch errno {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		default:
			return errno
		}
	}
}
