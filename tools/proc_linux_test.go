package tools

import (
	"context"
	"syscall"
	"testing"
	"time"
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
	for _, wrong := range []ProcessIdentity{
		{PID: id.PID, BootID: id.BootID, StartTicks: id.StartTicks + 1},
		{PID: id.PID, BootID: "another-boot", StartTicks: id.StartTicks},
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
