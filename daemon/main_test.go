package daemon

import (
	"os"
	"testing"

	"github.com/sessiond/sessiond/fixtures/pgtest"
)

// TestMain stops the package's private PostgreSQL cluster, started lazily
// by the tests that run the daemon on PostgreSQL (cluster_test.go).
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
