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

// TestPostgresSocketOutOfSandbox: the daemon reaches its PostgreSQL store
// through a unix socket anybody may connect to. A sandboxed terminal
// command, approved once by a person, tries to connect to that socket (with
// it, a command could write the store and approve its own commands): the
// socket is out of its reach. With sandbox mode off the same command
// connects, so the test can fail.
func TestPostgresSocketOutOfSandbox(t *testing.T) {
	// Not under t.TempDir (0700): the server runs as user postgres.
	public, err := os.MkdirTemp("", "sessiond-pgsock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(public) })
	if err := os.Chmod(public, 0o755); err != nil {
		t.Fatal(err)
	}
	pg, err := pgtest.Start(pgtest.Options{PublicSocketDir: public})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.Stop)
	_, dsn, err := pg.CreateDatabase()
	if err != nil {
		t.Fatal(err)
	}
	dsn = strings.Replace(dsn, "host="+pg.SocketDir(), "host="+public, 1)
	sock := filepath.Join(public, ".s.PGSQL.5432")
	connect := `python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print("CONNECTED")' ` + sock
	for _, mode := range []string{"workspace-write", "off"} {
		t.Run(mode, func(t *testing.T) {
			m := fixtures.NewFakeModel(t)
			d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m,
				"approvals: {mode: manual, timeout: 60}\nsandbox: {mode: "+mode+"}\nstore: {driver: postgres, dsn: '"+dsn+"'}\n")})
			c := d.Dial(t)
			s := createSession(t, c, map[string]any{})
			resume(t, c, s.SessionID)
			out, _ := sbRun(t, d, c, m, s.SessionID, "reach the store "+mode, connect, false)
			if connected := strings.Contains(out, "CONNECTED"); connected != (mode == "off") {
				t.Fatalf("sandbox %s: connected %v, tool result %q", mode, connected, out)
			}
		})
	}
}
