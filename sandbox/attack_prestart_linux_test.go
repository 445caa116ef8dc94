package sandbox

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Attacks on pre-started helpers (Prestart, issue 28 phase A): what a
// command can learn or reach of the helper that waited for it, compared
// with what a cold helper's command can.

// mountPoints returns the mount points (field 5) of the mountinfo lines in
// text; lines that are not mountinfo (no numeric mount id first) are
// skipped.
func mountPoints(text string) map[string]bool {
	mps := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) <= 5 {
			continue
		}
		if _, err := strconv.ParseUint(f[0], 10, 64); err != nil {
			continue
		}
		mps[f[4]] = true
	}
	return mps
}

// TestAttackPrestartHostMountinfo (FAILED before the fix): PID 1 of a
// pre-started command's namespace is the helper, whose threads but the
// one that built the view stayed in the daemon's mount namespace, and
// /proc/PID/mountinfo needs no ptrace access: `cat /proc/1/mountinfo`
// listed every mount of the host (the daemon's home when it is a mount
// of its own, other daemons' homes, other users' mounts), where a cold
// helper's command sees only its view. Each thread of PID 1 must show no
// mount outside the command's own view.
func TestAttackPrestartHostMountinfo(t *testing.T) {
	l := newLayout(t)
	if os.Geteuid() == 0 {
		// The daemon's home as a mount of its own (a tmpfs home, as the
		// disk-full tests make): its path must not reach the command.
		if err := unix.Mount("tmpfs", l.home, "tmpfs", 0, "size=1m,mode=700"); err != nil {
			t.Fatal(err)
		}
		defer unix.Unmount(l.home, unix.MNT_DETACH)
	}
	s := l.spec(ModeWorkspaceWrite, l.work)
	// A thread of PID 1 may end between the glob and its cat (the one
	// that forked the shell does): that cat's complaint is no mount.
	const probe = `cat /proc/self/mountinfo; echo =====; for f in /proc/1/mountinfo /proc/1/task/*/mountinfo; do cat "$f" 2>/dev/null; done`
	for _, pre := range []bool{false, true} {
		var out string
		var code int
		if pre {
			out, code = runPrestarted(t, s, probe, nil)
		} else {
			out, code = run(t, s, probe)
		}
		own, pid1, ok := strings.Cut(out, "=====")
		if code != 0 || !ok {
			t.Fatalf("pre-started %v: exit %d:\n%s", pre, code, out)
		}
		view := mountPoints(own)
		for mp := range mountPoints(pid1) {
			if !view[mp] {
				t.Errorf("pre-started %v: the helper (PID 1) shows the command %s, a mount outside its view", pre, mp)
			}
		}
		if strings.Contains(pid1, l.home) {
			t.Errorf("pre-started %v: PID 1's mountinfo names the daemon's home:\n%s", pre, pid1)
		}
	}
}
