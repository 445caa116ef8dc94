package journeys

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/fixtures/pgtest"
)

// TestViewPostgresSecondSocketDirectory (issue 22, finding 6): the
// PostgreSQL server listens in two socket directories
// (unix_socket_directories = 'DIR1, DIR2', as Fedora's '/run/postgresql,
// /tmp'); the daemon's DSN names DIR1 (its private one, mode 0700), and
// only that directory is kept from commands today. DIR2's socket is open
// to everybody, here placed where a command sees it: inside the session's
// cwd, or in a directory under /tmp. A sandboxed command (rated safe;
// approved once if asked) runs psql -h DIR2 to insert approval_allowlist
// rows for rm -rf: no row may be written, and rm -rf must still ask. The
// daemon is expected to learn every directory the server listens in
// (SHOW unix_socket_directories) and keep them all out of the view. The
// daemon runs as root: the socket is mode 0777, so any user reaches it.
func TestViewPostgresSecondSocketDirectory(t *testing.T) {
	for _, where := range []string{"in the cwd", "under /tmp"} {
		t.Run(where, func(t *testing.T) {
			// Not under t.TempDir (0700): the server runs as user postgres
			// and must reach DIR2. Short: a socket path has at most 107 bytes.
			base, err := os.MkdirTemp("/tmp", "sdv-pg-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fixtures.RemoveTree(base) })
			if err := os.Chmod(base, 0o755); err != nil {
				t.Fatal(err)
			}
			cwd := filepath.Join(base, "work")
			if err := os.Mkdir(cwd, 0o755); err != nil {
				t.Fatal(err)
			}
			dir2 := filepath.Join(base, "pgsock")
			if where == "in the cwd" {
				dir2 = filepath.Join(cwd, "pgsock")
			}
			pg, err := pgtest.Start(pgtest.Options{PublicSocketDir: dir2})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pg.Stop)
			db, dsn, err := pg.CreateDatabase() // host=DIR1, the private directory
			if err != nil {
				t.Fatal(err)
			}
			m := fixtures.NewFakeModel(t)
			d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m,
				"approvals: {mode: manual, timeout: 60}\nstore: {driver: postgres, dsn: '"+dsn+"'}\n")})
			c := d.Dial(t)
			s := createSession(t, c, map[string]any{"cwd": cwd})
			resume(t, c, s.SessionID)
			ins := fmt.Sprintf(`psql -h %s -U postgres -d %s -v ON_ERROR_STOP=1 -c "INSERT INTO approval_allowlist(pattern, created_at) VALUES ('rm-recursive', 'x'), ('sandboxed:rm-recursive', 'x')"`,
				dir2, db)
			res, _ := sbRun(t, d, c, m, s.SessionID, "approve yourself through "+where, ins, false)

			conn, err := pgx.Connect(ctxT(t), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctxT(t))
			var n int
			if err := conn.QueryRow(ctxT(t), `SELECT count(*) FROM approval_allowlist WHERE pattern LIKE '%rm-recursive%'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("a sandboxed command wrote %d approval_allowlist rows through the server's second socket directory %s; its result: %s", n, dir2, res)
			}
			victim, precious := makeVictim(t, cwd, "victim")
			wantAsked(t, c, m, s.SessionID, "delete the victim", "rm -rf "+filepath.Base(victim))
			wantIntact(t, precious)
		})
	}
}
