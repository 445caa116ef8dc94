package tools

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Identify returns the identity of the running process pid (a terminal
// command's process group leader): its boot id (/proc/sys/kernel/random/
// boot_id), start time (/proc/PID/stat field 22, clock ticks since boot),
// session (field 6) and marker (MarkerEnv in /proc/PID/environ; empty when
// absent or unreadable). It fails when the process does not exist.
func Identify(pid int) (ProcessIdentity, error) {
	boot, err := bootID()
	if err != nil {
		return ProcessIdentity{}, err
	}
	st, err := procStat(pid)
	if err != nil {
		return ProcessIdentity{}, err
	}
	if st.pgrp != pid {
		return ProcessIdentity{}, fmt.Errorf("tools: process %d is not a process group leader (group %d)", pid, st.pgrp)
	}
	return ProcessIdentity{PID: pid, BootID: boot, StartTicks: st.start, Session: st.session, Marker: marker(pid)}, nil
}

// marker returns the value of MarkerEnv in the environment process pid was
// started with, or "" when it has none or it cannot be read.
func marker(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return ""
	}
	for _, kv := range strings.Split(string(b), "\x00") {
		if val, ok := strings.CutPrefix(kv, MarkerEnv+"="); ok {
			return val // the first one, as getenv reads it (RunTerminal sets one)
		}
	}
	return ""
}

func bootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b)), err
}

// KillGroupIfSame kills process group id.PID with SIGKILL if it is still
// the group id names, and reports whether it did. That is so when its
// leader is still the very process (same boot, start time and session,
// still leading its group), or, once the leader has exited, when
// live members of group id.PID remain that carry the leader's marker in
// their environment, in the same session and boot, started no earlier than
// the leader. Anything else is left alone: false, nil. An identity without
// a marker (recorded by an older sessiond) is killed only while its leader
// lives.
func KillGroupIfSame(id ProcessIdentity) (bool, error) {
	if id.PID <= 1 {
		return false, fmt.Errorf("tools: refusing to kill process group %d", id.PID)
	}
	if holder, ok := groupHolds(id.PID); ok {
		// sessiond (or whatever started it) was itself started by that
		// command: killing the group would kill this process.
		return false, fmt.Errorf("tools: refusing to kill process group %d: it holds process %d, this process or one of its ancestors", id.PID, holder)
	}
	if now, err := Identify(id.PID); err == nil {
		// A live (or unreaped) leader is named by its start time; the
		// marker matters once it is gone, but a readable one that differs
		// names another process (a zombie's environ reads empty).
		if now.Marker != "" && id.Marker != "" && now.Marker != id.Marker {
			return false, nil
		}
		now.Marker = id.Marker
		if now != id {
			return false, nil // the pid now names another process
		}
	} else if !groupOutlivesLeader(id) {
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

// groupOutlivesLeader reports whether live (not zombie) members of group
// id.PID remain that belong to it: same boot, same session, started no
// earlier than the recorded leader, and carrying its marker. The marker is
// what tells them from the leftovers of an unrelated group that reused the
// id after all of ours died: the session does not (/proc shows session 0
// for every process whose session leader lives outside this PID namespace,
// as on CI runners), nor does the start time.
func groupOutlivesLeader(id ProcessIdentity) bool {
	if boot, err := bootID(); err != nil || boot != id.BootID || id.Marker == "" {
		return false
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil {
			continue
		}
		st, err := procStat(pid)
		if err == nil && st.pgrp == id.PID && st.session == id.Session && st.start >= id.StartTicks &&
			st.state != "Z" && st.state != "X" && marker(pid) == id.Marker {
			return true
		}
	}
	return false
}

// groupHolds returns this process or the first of its ancestors that is a
// member of process group pgid, if any.
func groupHolds(pgid int) (int, bool) {
	for pid := os.Getpid(); pid > 0; {
		st, err := procStat(pid)
		if err != nil {
			return 0, false
		}
		if st.pgrp == pgid {
			return pid, true
		}
		pid = st.ppid
	}
	return 0, false
}

type stat struct {
	state         string
	ppid          int
	pgrp, session int
	start         uint64
}

// procStat reads the state (field 3), parent (4), process group (5),
// session (6) and start time (22) of /proc/PID/stat. The command name (field 2) is
// parenthesised and may hold spaces and parentheses, so fields are counted
// after the last ')'.
func procStat(pid int) (stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return stat{}, fmt.Errorf("tools: malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 20 {
		return stat{}, fmt.Errorf("tools: short /proc/%d/stat", pid)
	}
	st := stat{state: f[0]}
	if st.ppid, err = strconv.Atoi(f[1]); err != nil {
		return stat{}, fmt.Errorf("tools: /proc/%d/stat ppid: %w", pid, err)
	}
	if st.pgrp, err = strconv.Atoi(f[2]); err != nil {
		return stat{}, fmt.Errorf("tools: /proc/%d/stat pgrp: %w", pid, err)
	}
	if st.session, err = strconv.Atoi(f[3]); err != nil {
		return stat{}, fmt.Errorf("tools: /proc/%d/stat session: %w", pid, err)
	}
	if st.start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return stat{}, fmt.Errorf("tools: /proc/%d/stat starttime: %w", pid, err)
	}
	return st, nil
}
