package tools

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Identify returns the identity of the running process pid (a terminal
// command's process group leader): its boot id (/proc/sys/kernel/random/
// boot_id) and start time (/proc/PID/stat field 22, clock ticks since
// boot). It fails when the process does not exist.
func Identify(pid int) (ProcessIdentity, error) {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ProcessIdentity{}, err
	}
	start, pgrp, err := procStat(pid)
	if err != nil {
		return ProcessIdentity{}, err
	}
	if pgrp != pid {
		return ProcessIdentity{}, fmt.Errorf("tools: process %d is not a process group leader (group %d)", pid, pgrp)
	}
	return ProcessIdentity{PID: pid, BootID: strings.TrimSpace(string(boot)), StartTicks: start}, nil
}

// KillGroupIfSame kills process group id.PID with SIGKILL if its leader is
// still the process id names (same boot, same start time, still leading
// its group), and reports whether it did. A leader that is gone, or a pid
// reused by another process, is left alone: false, nil.
func KillGroupIfSame(id ProcessIdentity) (bool, error) {
	if id.PID <= 1 {
		return false, fmt.Errorf("tools: refusing to kill process group %d", id.PID)
	}
	// Gone, no longer leading its group, or another process with the same
	// pid: not ours to kill.
	if now, err := Identify(id.PID); err != nil || now != id {
		return false, nil
	}
	if err := syscall.Kill(-id.PID, syscall.SIGKILL); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// procStat reads the start time (field 22) and the process group (field
// 5) of /proc/PID/stat. The command name (field 2) is parenthesised and
// may hold spaces and parentheses, so fields are counted after the last ')'.
func procStat(pid int) (start uint64, pgrp int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("tools: malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 20 {
		return 0, 0, fmt.Errorf("tools: short /proc/%d/stat", pid)
	}
	if pgrp, err = strconv.Atoi(f[2]); err != nil {
		return 0, 0, fmt.Errorf("tools: /proc/%d/stat pgrp: %w", pid, err)
	}
	if start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("tools: /proc/%d/stat starttime: %w", pid, err)
	}
	return start, pgrp, nil
}
