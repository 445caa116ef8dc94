package store

import (
	"fmt"
	"os"
	"testing"

	"github.com/sessiond/sessiond/fixtures/passes"
	"github.com/sessiond/sessiond/fixtures/pgtest"
	"go.uber.org/goleak"
)

// testDriver is the driver of the current pass: TestMain runs the package's
// tests on SQLite, then again on PostgreSQL (a private cluster, pgtest).
var testDriver = SQLite

// only holds the tests of one driver's own mechanics: they run in that
// driver's pass and are left out of the other (fixtures/passes).
var only passes.Registry

// TestMain runs every test on both drivers, but the tests of one driver's
// mechanics in its pass only, and fails the package's run when a selected
// test did not run exactly in its pass or a goroutine outlives the tests.
func TestMain(m *testing.M) {
	// SQLite's pragmas, WAL file, single writer and file system faults;
	// PostgreSQL's retries, several servers and LISTEN connection.
	only.Add(string(SQLite), TestCheckpointNoticesReadOnlyDatabase, TestCheckpointAfterClose,
		TestWALStartsOverUnderSustainedWrites, TestCheckpointBusy, TestCloseRacingInTx,
		TestOpenSetsPragmasPerConnection, TestBusyPastTimeoutIsUnavailableAndRecovers,
		TestDiskFullIsUnavailableAndRecovers, TestOpenReadOnlyFileFailsNamingIt,
		TestOpenWhileLockedIsNotReadOnly, TestIOErrorIsUnavailableAndRecovers, TestGroupCommitFailureReachesCallersThatFailed,
		TestMigrationsKeepTemporaryFilesOnDisk)
	only.Add(string(Postgres), TestPostgresRetriesSerializationFailure, TestPostgresReadCommitted,
		TestPostgresRetriesDeadlock, TestPostgresLockSessionsSerializes, TestPostgresPoolMaxConns, TestPostgresRetriesAreBounded,
		TestPostgresConcurrentOpenMigratesOnce, TestPostgresHooksInCommitOrder,
		TestPostgresReadOnlyIsUnavailable, TestPostgresServerGoneIsUnavailable,
		TestPostgresDeadPooledConnectionsAreReplaced, TestListenReconnects)
	code := only.Run(m, string(SQLite))
	testDriver = Postgres
	fmt.Println("=== the same tests on PostgreSQL")
	if c := only.Run(pgtest.Wrap(m), string(Postgres)); code == 0 {
		code = c
	}
	if err := only.Check(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, err)
		code = 1
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

// sqliteOnly starts a test of SQLite's own mechanics (pragmas, the WAL
// file, the single writer's group commit, file system faults), selected in
// TestMain for the SQLite pass; what they protect has PostgreSQL tests of
// its own (postgres_test.go). It fails a test not selected so.
func sqliteOnly(t testing.TB) {
	t.Helper()
	only.Mark(t, string(SQLite))
}
