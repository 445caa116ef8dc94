package cluster_test

import (
	"os"
	"testing"

	"github.com/sessiond/sessiond/cluster"
	"github.com/sessiond/sessiond/fixtures/storetest"
	"github.com/sessiond/sessiond/store"
)

// TestMain runs the tests on SQLite and then on PostgreSQL (the tests of
// several writers or pg_notify in the PostgreSQL pass only), and fails the
// package's run when a goroutine outlives its tests.
func TestMain(m *testing.M) {
	os.Exit(storetest.Main(m, storetest.Select(store.Postgres,
		TestRenewNotDelayedBySaturatedPool, cluster.TestAttackClusterPublishSurvivesAFailedBatch)))
}
