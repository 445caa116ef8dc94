package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/fixtures"
)

// A process the command leaves behind (setsid, double fork) does not
// outlive the command: the helper is init of the command's PID namespace
// and its exit kills the rest. A tee-like helper that finishes within the
// grace still writes its output. ps sees only the command's processes.
func TestLeftoversDieWithTheCommand(t *testing.T) {
	l := newLayout(t)
	s := l.spec(ModeWorkspaceWrite, l.work)
	alive := filepath.Join(l.work, "alive")
	out, code := run(t, s, fmt.Sprintf(`setsid sh -c 'while :; do date +%%s%%N > %s; sleep 0.05; done' </dev/null >/dev/null 2>&1 &
(sleep 0.2; echo late) &
echo procs=$(ps -e -o pid= | wc -l)`, alive))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if !strings.Contains(out, "late") {
		t.Errorf("a background writer that ends within the grace lost its output: %q", out)
	}
	var procs int
	if _, err := fmt.Sscanf(out[strings.Index(out, "procs="):], "procs=%d", &procs); err != nil || procs > 10 {
		t.Errorf("ps sees %d processes (%v), not only the command's own: %q", procs, err, out)
	}
	if _, err := os.ReadFile(alive); err != nil {
		t.Fatalf("the setsid loop never ran: %v", err)
	}
	// The kernel kills the rest of the namespace when its init (the helper)
	// exits; the loop's shell is named by its command line.
	fixtures.Eventually(t, 10*time.Second, "the command's setsid loop to be gone", func() bool {
		return len(liveProcsWithArg(alive)) == 0
	})
}

// liveProcsWithArg lists the pids of live (not zombie) processes whose
// command line contains s.
func liveProcsWithArg(s string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cl, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cl, []byte(s)) {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && st[i+2] != 'Z' && st[i+2] != 'X' {
			pids = append(pids, pid)
		}
	}
	return pids
}

// SIGTERM to the helper (init of the command's namespace) reaches the
// shell, whose status the helper returns.
func TestHelperForwardsSIGTERM(t *testing.T) {
	l := newLayout(t)
	s := l.spec(ModeWorkspaceWrite, l.work)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, err := s.Command(ctx, `trap 'echo got-term; exit 3' TERM; touch "$TMPDIR/ready"; while :; do sleep 0.05; done`)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = l.work
	cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + l.tmp}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fixtures.Eventually(t, 20*time.Second, "the command to start", func() bool {
		_, err := os.Stat(filepath.Join(l.tmp, "ready"))
		return err == nil
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(out.String(), "got-term") {
		t.Fatalf("err %v, output %q; want exit 3 from the shell's trap", err, out.String())
	}
}

// The helper, PID 1 of the command's namespace, confines the thread it
// forks the shell from; its other threads keep the helper's capabilities.
// No thread of it stays in the command's Landlock domain and it is
// non-dumpable: the command can neither signal nor trace it, nor read its
// memory, environment, descriptors or root through /proc.
func TestCommandCannotReachTheHelper(t *testing.T) {
	l := newLayout(t)
	s := l.spec(ModeWorkspaceWrite, l.work)
	probes := map[string]string{
		"environ": `cat /proc/1/environ >/dev/null`,
		"mem":     `dd if=/proc/1/mem bs=1 count=1 skip=4194304 of=/dev/null`,
		"fd":      `readlink /proc/1/fd/0`,
		"root":    `ls /proc/1/root/`,
		"cwd":     `ls /proc/1/cwd/`,
		"signal":  `kill -s TERM 1`,
	}
	if _, err := exec.LookPath("strace"); err == nil {
		probes["ptrace"] = `strace -p 1 -e trace=none -o /dev/null & p=$!; sleep 0.3; kill $p 2>/dev/null; wait $p`
	}
	for name, probe := range probes {
		out, code := run(t, s, `echo "init=$(cat /proc/1/cmdline | tr '\0' ' ')"; `+probe+` && echo REACH""ED`)
		if !slices.ContainsFunc([]string{HelperArg, stage2Arg, prestartArg, prestartStage2Arg}, func(a string) bool { return strings.Contains(out, "init=/proc/self/exe "+a+" ") }) {
			t.Fatalf("%s: PID 1 of the command's namespace is not the helper: %q (exit %d)", name, out, code)
		}
		if strings.Contains(out, "REACHED") {
			t.Errorf("%s: the command reached the helper (PID 1): exit %d, %q", name, code, out)
		}
	}
}
