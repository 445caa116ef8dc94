package prompts_test

import (
	"os"
	"testing"

	"github.com/sessiond/sessiond/fixtures/storetest"
)

// TestMain runs the tests on SQLite and then on PostgreSQL, and fails the
// package's run when a goroutine outlives its tests.
func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }
