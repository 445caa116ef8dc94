package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/fixtures"
)

// TestKillGroupIfSame: a command's process group, identified while it
// runs, is killed by KillGroupIfSame (children included), but only while
// its leader is the very process identified: a wrong start time, a wrong
// boot id or a dead leader kill nothing.
func TestKillGroupIfSame(t *testing.T) {
	ids := make(chan ProcessIdentity, 1)
	done := make(chan TerminalResult, 1)
	go func() {
		res, _ := RunTerminal(context.Background(), "sleep 60 & sleep 60; echo not-killed", TerminalOptions{
			Timeout: 2 * time.Minute,
			OnStart: func(pgid int) error {
				id, err := Identify(pgid)
				if err != nil {
					t.Errorf("Identify(%d): %v", pgid, err)
				}
				ids <- id
				return nil
			},
		})
		done <- res
	}()
	id := <-ids
	if id.PID <= 1 || id.BootID == "" || id.StartTicks == 0 {
		t.Fatalf("identity %+v", id)
	}
	// OnStart sees the gate; the leader then execs the command's shell, and
	// while it does /proc may read its environment empty (no marker to
	// compare). Wait until the shell runs (it has forked its sleeps) with the
	// marker readable, so the refusals below are about the identity alone.
	fixtures.Eventually(t, 20*time.Second, "the command's shell to run with its marker", func() bool {
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", id.PID, id.PID))
		now, err := Identify(id.PID)
		return err == nil && now.Marker != "" && len(strings.Fields(string(kids))) > 0
	})
	for _, wrong := range []ProcessIdentity{
		{PID: id.PID, BootID: id.BootID, StartTicks: id.StartTicks + 1, Session: id.Session},
		{PID: id.PID, BootID: "another-boot", StartTicks: id.StartTicks, Session: id.Session},
		// The same pid and start tick (a reuse within one clock tick) but
		// another command's marker.
		{PID: id.PID, BootID: id.BootID, StartTicks: id.StartTicks, Session: id.Session, Marker: NewMarker()},
	} {
		if killed, err := KillGroupIfSame(wrong); killed || err != nil {
			t.Fatalf("KillGroupIfSame(%+v) = %v, %v: killed a group it could not prove was ours", wrong, killed, err)
		}
	}
	if err := syscall.Kill(-id.PID, 0); err != nil {
		t.Fatalf("the group died from a refused kill: %v", err)
	}
	if killed, err := KillGroupIfSame(id); !killed || err != nil {
		t.Fatalf("KillGroupIfSame(%+v) = %v, %v, want killed", id, killed, err)
	}
	select {
	case res := <-done:
		if res.ExitCode != -1 {
			t.Fatalf("the command finished normally after its group was killed: %+v", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the command still runs 30 s after its group was killed")
	}
	if killed, err := KillGroupIfSame(id); killed || err != nil {
		t.Fatalf("second KillGroupIfSame on a dead group = %v, %v", killed, err)
	}
	if _, err := KillGroupIfSame(ProcessIdentity{PID: 1}); err == nil {
		t.Fatal("KillGroupIfSame accepted pid 1")
	}
}

// TestKillGroupAfterLeaderExited: a background job outlives its group's
// leader (the shell exited and was reaped, as under a reaping init). The
// group is still the one recorded (the job carries the leader's marker, same
// session, started after the leader), so KillGroupIfSame kills it; a wrong
// session, a wrong marker or none kill nothing.
func TestKillGroupAfterLeaderExited(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", `read _; sleep 300 & echo $!`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), MarkerEnv+"="+NewMarker()) // as RunTerminal does
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Identify while the shell waits on stdin. Its session may be 0: /proc
	// says so when the session leader is outside this PID namespace (CI).
	// Until the child has called execve, /proc shows this process's
	// environment, without the marker: wait for the shell's.
	var id ProcessIdentity
	fixtures.Eventually(t, 20*time.Second, "the shell's environment with the marker", func() bool {
		id, err = Identify(cmd.Process.Pid)
		if err != nil || id.StartTicks == 0 {
			t.Fatalf("Identify: %+v %v", id, err)
		}
		return len(id.Marker) == 32
	})
	in.Write([]byte("go\n"))
	var bg int
	if _, err := fmt.Fscan(out, &bg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(bg, syscall.SIGKILL) })
	cmd.Wait() // the leader exits and is reaped; its background job lives on
	if st, err := procStat(bg); err != nil || st.pgrp != id.PID {
		t.Fatalf("background job %d: %+v %v", bg, st, err)
	}
	for _, wrong := range []ProcessIdentity{
		{PID: id.PID, BootID: id.BootID, StartTicks: id.StartTicks, Session: id.Session + 1, Marker: id.Marker},
		{PID: id.PID, BootID: id.BootID, StartTicks: id.StartTicks, Session: id.Session, Marker: NewMarker()},
		{PID: id.PID, BootID: id.BootID, StartTicks: id.StartTicks, Session: id.Session},
	} {
		if killed, err := KillGroupIfSame(wrong); killed || err != nil {
			t.Fatalf("KillGroupIfSame(%+v) = %v, %v: killed a group it could not prove was ours", wrong, killed, err)
		}
	}
	if killed, err := KillGroupIfSame(id); !killed || err != nil {
		t.Fatalf("KillGroupIfSame after the leader exited = %v, %v, want killed", killed, err)
	}
	fixtures.Eventually(t, 20*time.Second, fmt.Sprintf("background job %d to die", bg), func() bool {
		st, err := procStat(bg)
		return err != nil || st.state == "Z"
	})
}

// TestKillGroupSparesReusedGroupID: the recorded command's whole group is
// gone; an unrelated job gets the same pid (forced with ns_last_pid), leads
// its own group in the same session and leaves a background child. That
// child is not the command's, and KillGroupIfSame must not kill it. Runs
// only inside TestKillGroupInPIDNamespace's namespace, where every process
// has session 0 and ns_last_pid is the namespace's own.
func TestKillGroupSparesReusedGroupID(t *testing.T) {
	if os.Getenv("SESSIOND_IN_PIDNS") == "" {
		t.Skip("runs inside TestKillGroupInPIDNamespace")
	}
	first := exec.Command("/bin/sh", "-c", "read _")
	first.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	first.Env = append(os.Environ(), MarkerEnv+"="+NewMarker())
	in, err := first.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	id, err := Identify(first.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	in.Write([]byte("x\n"))
	first.Wait() // the command and its group are gone
	if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(fmt.Sprint(id.PID-1)), 0); err != nil {
		t.Skipf("cannot force the next pid (ns_last_pid): %v", err)
	}
	other := exec.Command("/bin/sh", "-c", `sleep 300 >/dev/null 2>&1 & echo $!`)
	other.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := other.Output() // the leader exits; its child lives on in group id.PID
	if err != nil {
		t.Fatal(err)
	}
	if other.Process.Pid != id.PID {
		t.Fatalf("the pid was not reused: %d, want %d", other.Process.Pid, id.PID)
	}
	var bg int
	if _, err := fmt.Sscan(string(out), &bg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(bg, syscall.SIGKILL) })
	if st, err := procStat(bg); err != nil || st.pgrp != id.PID || st.session != id.Session || st.start < id.StartTicks {
		t.Fatalf("the unrelated child %d is not a look-alike: %+v %v (recorded %+v)", bg, st, err, id)
	}
	if killed, err := KillGroupIfSame(id); killed || err != nil {
		t.Fatalf("KillGroupIfSame(%+v) = %v, %v: killed an unrelated group that reused the id", id, killed, err)
	}
	if st, err := procStat(bg); err != nil || st.state == "Z" {
		t.Fatalf("the unrelated child died: %+v %v", st, err)
	}
}

// TestKillGroupInPIDNamespace runs TestKillGroupAfterLeaderExited and
// TestKillGroupSparesReusedGroupID in a new PID namespace whose session
// leader is outside it, where /proc shows session 0 for every process (as on
// CI runners). Needs root and unshare(1).
func TestKillGroupInPIDNamespace(t *testing.T) {
	if os.Getenv("SESSIOND_IN_PIDNS") != "" {
		t.Skip("already inside the namespace")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare(1) not installed")
	}
	// Root is not enough (a container's root may lack CAP_SYS_ADMIN, or
	// seccomp may refuse unshare), and without root a user namespace may
	// still do. Probe, and skip when neither works.
	nsArgs := []string{"--pid", "--fork", "--mount-proc"}
	if os.Geteuid() != 0 {
		nsArgs = append([]string{"--user", "--map-root-user"}, nsArgs...)
	}
	if out, err := exec.Command(unshare, append(nsArgs, "true")...).CombinedOutput(); err != nil {
		t.Skipf("cannot create a PID namespace here (euid %d): %v: %s", os.Geteuid(), err, strings.TrimSpace(string(out)))
	}
	cmd := exec.Command(unshare, append(nsArgs, os.Args[0],
		"-test.run", "^(TestKillGroupAfterLeaderExited|TestKillGroupSparesReusedGroupID)$", "-test.v", "-test.count", "1")...)
	cmd.Env = append(os.Environ(), "SESSIOND_IN_PIDNS=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in a new PID namespace: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestKillGroupAfterLeaderExited") {
		t.Fatalf("TestKillGroupAfterLeaderExited did not pass in the namespace:\n%s", out)
	}
	// Forcing a pid needs ns_last_pid, which a user namespace may refuse.
	if !strings.Contains(string(out), "--- PASS: TestKillGroupSparesReusedGroupID") &&
		!strings.Contains(string(out), "--- SKIP: TestKillGroupSparesReusedGroupID") {
		t.Fatalf("TestKillGroupSparesReusedGroupID did not pass in the namespace:\n%s", out)
	}
	t.Logf("in a new PID namespace:\n%s", out)
}

// TestKillGroupHelper is not a test: TestKillGroupRefusesOwnGroup runs the
// test binary as (a member of) a recorded command's process group, like a
// sessiond started by a tool command, to run the boot kill on that group.
func TestKillGroupHelper(t *testing.T) {
	js := os.Getenv("SESSIOND_TEST_KILL_ID")
	if js == "" {
		t.Skip("helper process of TestKillGroupRefusesOwnGroup")
	}
	var id ProcessIdentity
	if err := json.Unmarshal([]byte(js), &id); err != nil {
		t.Fatal(err)
	}
	killed, err := KillGroupIfSame(id)
	fmt.Printf("SURVIVED killed=%v err=%v\n", killed, err)
}

// TestKillGroupRefusesOwnGroup: a sessiond started by a tool command (the
// model restarting the daemon: "exec sessiond", or "sessiond &") would at
// boot find that command's group recorded by the crashed daemon. Killing
// it would kill the daemon itself: KillGroupIfSame refuses with an error,
// whether the caller is the group's leader or a member.
func TestKillGroupRefusesOwnGroup(t *testing.T) {
	for _, script := range []string{
		`IFS= read -r SESSIOND_TEST_KILL_ID; export SESSIOND_TEST_KILL_ID; exec "$0" -test.run '^TestKillGroupHelper$'`,
		`IFS= read -r SESSIOND_TEST_KILL_ID; export SESSIOND_TEST_KILL_ID; "$0" -test.run '^TestKillGroupHelper$'; exit 0`,
	} {
		cmd := exec.Command("/bin/sh", "-c", script, os.Args[0])
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Env = append(os.Environ(), MarkerEnv+"="+NewMarker())
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		id, err := Identify(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		js, _ := json.Marshal(id)
		fmt.Fprintf(in, "%s\n", js)
		in.Close()
		err = cmd.Wait()
		if err != nil || !strings.Contains(out.String(), "SURVIVED killed=false err=tools: refusing to kill process group") ||
			!strings.Contains(out.String(), "holds process") {
			t.Fatalf("%s: the boot kill run from inside the recorded group: %v\n%s", script, err, out.String())
		}
	}
}
