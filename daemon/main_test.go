package daemon

import (
	"testing"

	"github.com/sessiond/sessiond/fixtures/pgtest"
	"go.uber.org/goleak"
)

// TestMain stops the package's private PostgreSQL cluster, started lazily
// by the tests that run the daemon on PostgreSQL (cluster_test.go), and
// fails the run when a goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Wrap(m)) }
