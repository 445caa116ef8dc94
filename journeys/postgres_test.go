package journeys

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/fixtures/pgtest"
)

// TestPostgresStoreTurn: the real sessiond on a private PostgreSQL database
// (config.yaml store: {driver: postgres, dsn}) runs a turn end to end,
// keeps no state.db, reports the driver in daemon.info without the DSN's
// password (nor logs it), and after a restart finds the session, its
// transcript and a new boot epoch in the database.
func TestPostgresStoreTurn(t *testing.T) {
	pg, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.Stop)
	// The test cluster trusts local connections, so a password is accepted
	// and ignored: it is here to show that it is never displayed.
	dsn := strings.Replace(pg.NewDatabase(t), "postgres://postgres@", "postgres://postgres:hunter2@", 1)
	m := fixtures.NewFakeModel(t)
	m.On("hello postgres", fixtures.Reply{Text: "hello from the turn"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "store: {driver: postgres, dsn: '"+dsn+"'}\n")})
	c := d.Dial(t)
	var info struct {
		Storage struct {
			Driver   string `json:"driver"`
			Database string `json:"database"`
		} `json:"storage"`
	}
	if err := c.Call(ctxT(t), "daemon.info", map[string]any{}, &info); err != nil {
		t.Fatal(err)
	}
	if info.Storage.Driver != "postgres" || !strings.Contains(info.Storage.Database, "postgres:xxxxx@") || strings.Contains(info.Storage.Database, "hunter2") {
		t.Fatalf("daemon.info storage = %+v", info.Storage)
	}
	s := createSession(t, c, map[string]any{})
	r := submit(t, c, s.SessionID, "in-1", "hello postgres")
	c.WaitEvent(t, wait, func(e fixtures.Event) bool { return e.Type == "turn.completed" && e.AdmissionID == r.AdmissionID })
	snap := resume(t, c, s.SessionID)
	if len(snap.Messages) != 2 || snap.Messages[1].Content != "hello from the turn" || snap.ExecutionGeneration != 1 {
		t.Fatalf("snapshot = %+v", snap)
	}
	if _, err := os.Stat(filepath.Join(d.Home, "state.db")); !os.IsNotExist(err) {
		t.Fatalf("state.db in the home of a postgres daemon: %v", err)
	}
	// The rows are in PostgreSQL.
	conn, err := pgx.Connect(ctxT(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var status, outcome string
	if err := conn.QueryRow(ctxT(t), `SELECT status, outcome FROM session_admissions WHERE admission_id = $1`, r.AdmissionID).Scan(&status, &outcome); err != nil || status != "terminal" || outcome != "completed" {
		t.Fatalf("admission row: %s %s %v", status, outcome, err)
	}
	epoch := d.Desc.BootEpoch
	if code := d.SIGTERM(t); code != 0 {
		t.Fatalf("SIGTERM exit code %d\n%s", code, d.Stderr())
	}
	d.Restart(t)
	if d.Desc.BootEpoch != epoch+1 {
		t.Fatalf("boot_epoch %d after %d", d.Desc.BootEpoch, epoch)
	}
	var clean int
	if err := conn.QueryRow(ctxT(t), `SELECT clean_stop FROM boot_epochs WHERE epoch = $1`, epoch).Scan(&clean); err != nil || clean != 1 {
		t.Fatalf("boot_epochs of the stopped daemon: clean_stop=%d %v", clean, err)
	}
	c = d.Dial(t)
	snap = resume(t, c, s.SessionID)
	if len(snap.Messages) != 2 || snap.Messages[0].Content != "hello postgres" {
		t.Fatalf("after the restart: %+v", snap.Messages)
	}
	if logs := d.AllStderr(); strings.Contains(logs, "hunter2") {
		t.Fatal("the DSN's password is in the daemon's log")
	} else if !strings.Contains(logs, "driver=postgres") {
		t.Fatalf("no log line names the store driver:\n%s", logs)
	}
}
