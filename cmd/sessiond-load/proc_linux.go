package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// setProcAttrs makes the kernel send the spawned daemon SIGTERM (a graceful
// stop) when this tool dies without stopping it. The signal is tied to the
// thread that forked the child, so the caller starts and waits for the
// child on a goroutine locked to its OS thread.
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

// raiseNoFile raises this process's RLIMIT_NOFILE soft limit to the hard
// limit and returns both. Setting it explicitly (rather than relying on the
// Go runtime, which raises it for itself but restores the original soft
// limit in children) makes the spawned daemon inherit the raised limit.
func raiseNoFile() (soft, hard uint64, err error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, err
	}
	rl.Cur = rl.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, rl.Max, err
	}
	return rl.Cur, rl.Max, nil
}

// readMem reads /proc/PID/status (pid 0 means this process) and counts
// /proc/PID/fd. FDs is -1 when the fd directory cannot be read.
func readMem(pid int) (Mem, error) {
	dir := "/proc/self"
	if pid > 0 {
		dir = "/proc/" + strconv.Itoa(pid)
	}
	b, err := os.ReadFile(dir + "/status")
	if err != nil {
		return Mem{}, err
	}
	var m Mem
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(val)
		if len(fields) == 0 {
			continue
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		switch key {
		case "VmRSS":
			m.RSSBytes = n << 10
		case "VmHWM":
			m.HWMBytes = n << 10
		case "Threads":
			m.Threads = int(n)
		}
	}
	if m.RSSBytes == 0 {
		return m, fmt.Errorf("%s/status has no VmRSS", dir)
	}
	m.FDs = -1
	if ents, err := os.ReadDir(dir + "/fd"); err == nil {
		m.FDs = len(ents)
	}
	return m, nil
}

// cpuTime returns the user+system CPU time of pid (0: this process) from
// /proc/PID/stat, in seconds (clock ticks of 1/100 s, the Linux USER_HZ).
func cpuTime(pid int) (float64, error) {
	path := "/proc/self/stat"
	if pid > 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/stat"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields after ")" are
	// 3 onwards, so utime (14) and stime (15) are at 11 and 12.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("%s: unexpected format", path)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%s: unexpected format", path)
	}
	return float64(ut+st) / 100, nil
}

// loadAvg returns the 1, 5 and 15 minute load averages.
func loadAvg() [3]float64 {
	var la [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return la
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		la[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return la
}
