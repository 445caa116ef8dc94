package cluster_test

import (
	"os"
	"testing"

	"github.com/sessiond/sessiond/fixtures/storetest"
)

// TestMain runs the tests on SQLite and then on PostgreSQL.
func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }
