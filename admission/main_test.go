package admission_test

import (
	"os"
	"testing"

	"github.com/sessiond/sessiond/fixtures/storetest"
	"github.com/sessiond/sessiond/store"
)

// TestMain runs the tests on SQLite and then on PostgreSQL (the tests of
// one driver's mechanics in its pass only), and fails the package's run
// when a goroutine outlives its tests.
func TestMain(m *testing.M) {
	os.Exit(storetest.Main(m, storetest.Select(store.SQLite, TestStorageFull),
		storetest.Select(store.Postgres, TestFencedWriteRacesTakeover)))
}
