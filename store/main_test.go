package store

import (
	"fmt"
	"os"
	"testing"

	"github.com/sessiond/sessiond/fixtures/pgtest"
	"go.uber.org/goleak"
)

// testDriver is the driver of the current pass: TestMain runs the package's
// tests on SQLite, then again on PostgreSQL (a private cluster, pgtest).
var testDriver = SQLite

// TestMain runs every test on both drivers and fails the package's run when
// a goroutine outlives its tests.
func TestMain(m *testing.M) {
	code := m.Run()
	testDriver = Postgres
	fmt.Println("=== the same tests on PostgreSQL")
	if c := pgtest.Main(m); code == 0 {
		code = c
	}
	if durable != nil {
		durable.Stop()
	}
	if err := goleak.Find(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		code = 1
	}
	os.Exit(code)
}

// durable is the cluster of benchmarks, with fsync on (pgtest's shared
// cluster has it off).
var durable *pgtest.Cluster

// testOptions is opt for the current pass: on PostgreSQL with a fresh
// database (for a benchmark, on a cluster with fsync on).
func testOptions(t testing.TB, opt Options) Options {
	t.Helper()
	if testDriver != Postgres {
		return opt
	}
	opt.Driver = Postgres
	if _, bench := t.(*testing.B); !bench {
		opt.DSN = pgtest.DSN(t)
		return opt
	}
	if durable == nil {
		c, err := pgtest.Start(pgtest.Options{Durable: true})
		if err != nil {
			t.Fatal(err)
		}
		durable = c
	}
	opt.DSN = durable.NewDatabase(t)
	return opt
}

// sqliteOnly skips a test of SQLite's own mechanics (pragmas, the WAL file,
// the single writer's group commit, file system faults) in the PostgreSQL
// pass; what they protect has PostgreSQL tests of its own (postgres_test.go).
func sqliteOnly(t testing.TB) {
	t.Helper()
	if testDriver != SQLite {
		t.Skip("SQLite mechanics; see postgres_test.go for PostgreSQL's")
	}
}
