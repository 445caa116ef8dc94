package cluster

import (
	"github.com/sessiond/sessiond/store"
)

// Dialect is the SQL dialect of the store, for the few fragments that
// differ: the database's clock and row locking. The zero value is SQLite.
type Dialect int

// The dialects.
const (
	SQLite Dialect = iota
	Postgres
)

// DialectOf is the dialect of db's driver.
func DialectOf(db *store.DB) Dialect {
	if db.Driver() == store.Postgres {
		return Postgres
	}
	return SQLite
}

// NowMS is an SQL expression for the database's clock in milliseconds
// since 1970-01-01 UTC (an integer). Every lease is written and compared
// with it, so the daemons' clocks never meet: clock skew between hosts
// cannot make a lease look alive or dead.
func (d Dialect) NowMS() string {
	if d == Postgres {
		return `CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)`
	}
	return `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`
}

// LiveDaemon is an SQL condition that holds when the daemon whose id is
// the expression col holds an unexpired lease, on the database's clock.
func (d Dialect) LiveDaemon(col string) string {
	return `EXISTS (SELECT 1 FROM boot_epochs lease WHERE lease.epoch = ` + col + ` AND lease.lease_expires_ms > ` + d.NowMS() + `)`
}

// SkipLocked is the row-locking clause of a SELECT whose rows the
// transaction will take: on PostgreSQL the rows of alias are locked and
// rows locked by another daemon's transaction are skipped (FOR UPDATE
// SKIP LOCKED), so concurrent takeovers spread instead of queueing; SQLite
// serialises writers and needs none.
func (d Dialect) SkipLocked(alias string) string {
	if d == Postgres {
		return ` FOR UPDATE OF ` + alias + ` SKIP LOCKED`
	}
	return ""
}
