package daemon

import (
	"strings"
	"testing"

	"github.com/sessiond/sessiond/store"
)

// TestConfigStore: store.driver and store.dsn, SESSIOND_STORE_DSN and
// --store-dsn; bad values fail with an error naming the key and never the
// password.
func TestConfigStore(t *testing.T) {
	t.Setenv("SESSIOND_STORE_DSN", "")
	for yaml, want := range map[string]string{
		"store: {driver: mysql}":                                             `store.driver: must be sqlite or postgres, got "mysql"`,
		"store: {driver: postgres}":                                          `store.dsn: driver "postgres" needs a DSN`,
		"store: {driver: sqlite, dsn: 'postgres://u@h/db'}":                  "store.dsn: set for driver sqlite",
		"store: {dsn: 'mysql://u:hunter2@h/db'}":                             "store.dsn: DSN must be a postgres:// or postgresql:// URL",
		"store: {dsn: 'postgres://u:hunter2@h'}":                             "store.dsn: DSN postgres://u:xxxxx@h names no database",
		"store: {dsn: 'postgres://u:hunter2@/db'}":                           "store.dsn: DSN postgres://u:xxxxx@/db names no host",
		"store: {dsn: 'postgres://u:hunter2@h:port/db'}":                     "store.dsn: DSN is not a URL",
		"store: {driver: postgres, dsn: 'host=h dbname=d password=hunter2'}": "store.dsn: DSN must be a postgres:// or postgresql:// URL",
		"store: {max_conns: 4}":                                              "store.max_conns: set for driver sqlite",
		"store: {dsn: 'postgres://u@h/db', max_conns: -1}":                   "store.max_conns: must be 1-1000 (0: the default, 16), got -1",
		"store: {dsn: 'postgres://u@h/db', max_conns: 1001}":                 "store.max_conns: must be 1-1000 (0: the default, 16), got 1001",
		"store: {dsn: 'postgres://u:hunter2@h/db?pool_max_conns=0'}":         `store.dsn: DSN postgres://u:xxxxx@h/db?pool_max_conns=0: pool_max_conns="0": want an integer from 1 to 1000`,
		"store: {dsn: 'postgres://u@h/db?pool_max_conns=many'}":              `pool_max_conns="many": want an integer from 1 to 1000`,
	} {
		_, _, err := LoadConfig(writeTemp(t, yaml))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", yaml, err, want)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error shows the password: %v", yaml, err)
		}
	}
	check := func(cfg Config, wantDrv store.Driver, wantDSN string) {
		t.Helper()
		if d, dsn := cfg.StoreOptions(); d != wantDrv || dsn != wantDSN {
			t.Fatalf("StoreOptions = %s %q, want %s %q", d, dsn, wantDrv, wantDSN)
		}
	}
	load := func(yaml string) Config {
		t.Helper()
		cfg, _, err := LoadConfig(writeTemp(t, yaml))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	check(load(""), store.SQLite, "")
	check(load("store: {driver: sqlite}"), store.SQLite, "")
	if cfg := load("store: {dsn: 'postgres://u@h/db?pool_max_conns=8', max_conns: 32}"); cfg.Store.MaxConns != 32 {
		t.Fatalf("store.max_conns = %d, want 32", cfg.Store.MaxConns)
	}
	check(load("store: {dsn: 'postgres://u@h/db'}"), store.Postgres, "postgres://u@h/db")
	check(load("store: {driver: postgres, dsn: 'postgresql://u@/db?host=/run/pg'}"), store.Postgres, "postgresql://u@/db?host=/run/pg")
	// The environment fills an empty dsn; the file wins over it.
	t.Setenv("SESSIOND_STORE_DSN", "postgres://env@h/db")
	check(load(""), store.Postgres, "postgres://env@h/db")
	check(load("store: {dsn: 'postgres://file@h/db'}"), store.Postgres, "postgres://file@h/db")
	if _, _, err := LoadConfig(writeTemp(t, "store: {driver: sqlite}")); err == nil {
		t.Fatal("driver sqlite with SESSIOND_STORE_DSN set was accepted")
	}
	// --store-dsn wins over both and means postgres; a bad one is refused
	// and leaves the config as it was.
	cfg := load("")
	if err := cfg.overrideStoreDSN("postgres://flag@h/db"); err != nil {
		t.Fatal(err)
	}
	check(cfg, store.Postgres, "postgres://flag@h/db")
	t.Setenv("SESSIOND_STORE_DSN", "")
	cfg = load("")
	if err := cfg.overrideStoreDSN("postgres://u:hunter2@h"); err == nil || !strings.HasPrefix(err.Error(), "--store-dsn: DSN postgres://u:xxxxx@h names no database") {
		t.Fatalf("bad --store-dsn: %v", err)
	}
	check(cfg, store.SQLite, "")
}
