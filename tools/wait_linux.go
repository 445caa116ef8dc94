package tools

import (
	"bytes"
	"os"
	"strconv"
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

// groupHasLive reports whether a process of process group pgid is alive
// (neither a zombie nor dead). It lists /proc, asks each process's group
// with getpgid(2) (a cheap system call) and reads /proc/<pid>/stat only for
// the members, for their state. When /proc cannot be read it reports
// false: the group is then killed without waiting.
func groupHasLive(pgid int) bool {
	d, err := os.Open("/proc")
	if err != nil {
		return false
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return false
	}
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if g, err := syscall.Getpgid(pid); err != nil || g != pgid {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and ")".
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 3 || string(f[2]) != strconv.Itoa(pgid) { // the pid was reused since getpgid
			continue
		}
		if st := f[0]; len(st) == 1 && (st[0] == 'Z' || st[0] == 'X' || st[0] == 'x') {
			continue
		}
		return true
	}
	return false
}
