package journeys

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/fixtures"
)

// memoryCgroup makes a child of this process's memory cgroup (v2
// memory.max or v1 memory.limit_in_bytes, swap included) limited to limit
// bytes, removed at the end of the test; it returns the directory and the
// file to write a pid into. Root only; where root can make none, it fails.
func memoryCgroup(t *testing.T, limit int64) string {
	t.Helper()
	needRoot(t, "a memory cgroup of its own")
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatalf("no cgroups: %v", err)
	}
	name := fmt.Sprintf("sessiond-oom-%d", os.Getpid())
	try := func(base, rel string, limits map[string]string) string {
		dir := filepath.Join(base, rel, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return ""
		}
		for f, v := range limits {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0); err != nil && f != "memory.memsw.limit_in_bytes" && f != "memory.swap.max" && f != "memory.move_charge_at_immigrate" {
				os.Remove(dir)
				return ""
			}
		}
		t.Cleanup(func() {
			// Move whatever is left (nothing should be) out, then remove.
			procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
			for _, p := range strings.Fields(string(procs)) {
				os.WriteFile(filepath.Join(base, rel, "cgroup.procs"), []byte(p), 0)
			}
			os.Remove(dir)
		})
		return dir
	}
	l := strconv.FormatInt(limit, 10)
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case strings.Contains(","+f[1]+",", ",memory,"):
			if dir := try("/sys/fs/cgroup/memory", f[2], map[string]string{"memory.limit_in_bytes": l, "memory.memsw.limit_in_bytes": l, "memory.move_charge_at_immigrate": "3"}); dir != "" {
				return dir
			}
		case f[0] == "0" && f[1] == "":
			for _, base := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
				if c, err := os.ReadFile(filepath.Join(base, f[2], "cgroup.controllers")); err == nil && strings.Contains(string(c), "memory") {
					if dir := try(base, f[2], map[string]string{"memory.max": l, "memory.swap.max": "0"}); dir != "" {
						return dir
					}
				}
			}
		}
	}
	t.Fatal("no memory cgroup can be made here (v1 memory or v2 memory.max, writable by root)")
	return ""
}

// TestViewOOMKillsTheCommandNotTheDaemon (issue 22, finding 12): under a
// service memory limit, a command that starts many small processes, each
// smaller than the daemon, runs the cgroup out of memory. The OOM killer
// takes the largest score: without the commands' oom_score_adj of 1000
// that was the daemon, and its turn was left unknown. Now the command's
// processes are killed, the daemon survives and the turn completes.
func TestViewOOMKillsTheCommandNotTheDaemon(t *testing.T) {
	cg := memoryCgroup(t, 320<<20)
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: off}")})
	if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(d.Cmd.Process.Pid)), 0); err != nil {
		t.Fatalf("move the daemon into %s: %v", cg, err)
	}
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{})
	resume(t, c, s.SessionID)
	// 60 holders of 12 MB each: 720 MB against a 320 MB limit, each far
	// smaller than the daemon.
	hog := `for i in $(seq 60); do (head -c 12000000 /dev/zero; sleep 5) | tail -c 12000000 >/dev/null & done; wait; echo survived`
	res, _ := sbRun(t, d, c, m, s.SessionID, "fill the memory", hog, false)
	if !d.Running() {
		t.Fatalf("the daemon was killed under its memory limit; the command's result: %s", res)
	}
	// The daemon still runs turns.
	out, _ := sbRun(t, d, c, m, s.SessionID, "after the pressure", "echo still-here", false)
	if !strings.Contains(out, "still-here") {
		t.Fatalf("the turn after the memory pressure: %s", out)
	}
	if !strings.Contains(res, "killed") && !oomHit(cg) {
		t.Fatalf("the memory limit was never hit (the test proves nothing); the command's result: %s", res)
	}
}

// oomHit reports whether cgroup dir ran out of memory: v1 failcnt or
// oom_kill, v2 memory.events oom_kill.
func oomHit(dir string) bool {
	for _, f := range []string{"memory.failcnt", "memory.memsw.failcnt"} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil && strings.TrimSpace(string(b)) != "0" {
			return true
		}
	}
	for _, f := range []string{"memory.oom_control", "memory.events"} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, _ := strings.Cut(line, " "); k == "oom_kill" && v != "0" {
				return true
			}
		}
	}
	return false
}
