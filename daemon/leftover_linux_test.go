//go:build linux

package daemon

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/tools"
)

// TestKillLeftoverToolsSkipsCompletedCalls: of a crashed turn's commands,
// the boot kill reaches the one recorded running, and leaves alone the one
// whose tool.completed says its daemon saw it end (and killed its group
// then), even though its recorded identity still names a live group here.
func TestKillLeftoverToolsSkipsCompletedCalls(t *testing.T) {
	d := startTest(t, "")
	sid := mustSession(t, d)
	start := func() (*exec.Cmd, chan error, tools.ProcessIdentity) {
		cmd := exec.Command("sleep", "300")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		marker := tools.NewMarker()
		cmd.Env = append(os.Environ(), tools.MarkerEnv+"="+marker)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		id, err := tools.Identify(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		id.Marker = marker
		return cmd, exited, id
	}
	_, runningExited, runningID := start()
	_, doneExited, doneID := start()

	const adm = "adm_crashed"
	err := d.db.InTx(context.Background(), func(tx *store.Tx) error {
		if _, err := tx.Exec(`INSERT INTO session_admissions (admission_id, target_session_id, request_id, seq, status,
			execution_generation, owner_epoch, text, payload_digest, created_at) VALUES (?, ?, 'in-1', 1, 'unknown', 1, 1, 'x', 'd', ?)`,
			adm, sid, store.Now()); err != nil {
			return err
		}
		for call, id := range map[string]tools.ProcessIdentity{"c-running": runningID, "c-done": doneID} {
			if _, err := tx.AppendEvent(sid, "tool.running", adm, 1, map[string]any{"tool_call_id": call, "pid": id.PID,
				"boot_id": id.BootID, "start_ticks": id.StartTicks, "session": id.Session, "marker": id.Marker}); err != nil {
				return err
			}
		}
		_, err := tx.AppendEvent(sid, "tool.completed", adm, 1, map[string]any{"tool_call_id": "c-done", "ok": true})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.killLeftoverTools(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-runningExited:
	case <-time.After(30 * time.Second):
		t.Fatal("the command recorded running is alive 30 s after the boot kill")
	}
	// killLeftoverTools has returned, so a SIGKILL it sent is either
	// pending or already done its work: check both, no waiting needed.
	select {
	case err := <-doneExited:
		t.Fatalf("the boot kill hit a group whose call had completed: %v", err)
	default:
	}
	if why := killedOrDying(doneID.PID); why != "" {
		t.Fatalf("the boot kill hit a group whose call had completed: %s", why)
	}
}

// killedOrDying says why process pid is gone, dying or about to die of a
// pending SIGKILL (/proc/PID/status State, SigPnd, ShdPnd), or "" if none.
func killedOrDying(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err.Error()
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "State":
			if strings.HasPrefix(v, "Z") || strings.HasPrefix(v, "X") {
				return "state " + v
			}
		case "SigPnd", "ShdPnd":
			if mask, err := strconv.ParseUint(v, 16, 64); err == nil && mask&(1<<(syscall.SIGKILL-1)) != 0 {
				return k + " holds SIGKILL"
			}
		}
	}
	return ""
}
