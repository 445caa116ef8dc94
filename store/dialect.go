package store

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jmoiron/sqlx"
)

// Driver names the database engine behind a store (Options.Driver,
// config key store.driver).
type Driver string

// The drivers.
const (
	// SQLite is the default: state.db in the daemon's home, embedded, no
	// setup.
	SQLite Driver = "sqlite"
	// Postgres is a PostgreSQL database named by a DSN, which several
	// daemons may share.
	Postgres Driver = "postgres"
)

// ParseDriver validates a driver name; "" is SQLite.
func ParseDriver(s string) (Driver, error) {
	switch Driver(s) {
	case "", SQLite:
		return SQLite, nil
	case Postgres:
		return Postgres, nil
	}
	return "", fmt.Errorf("unknown store driver %q (want %q or %q)", s, SQLite, Postgres)
}

// CheckDSN validates a PostgreSQL DSN: a postgres:// or postgresql:// URL
// naming a database. The error never repeats the password.
func CheckDSN(dsn string) error {
	if dsn == "" {
		return fmt.Errorf("driver %q needs a DSN (postgres://USER:PASSWORD@HOST:PORT/DBNAME)", Postgres)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return fmt.Errorf("DSN is not a URL (want postgres://USER:PASSWORD@HOST:PORT/DBNAME)")
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return fmt.Errorf("DSN must be a postgres:// or postgresql:// URL (postgres://USER:PASSWORD@HOST:PORT/DBNAME)")
	}
	if strings.Trim(u.Path, "/") == "" {
		return fmt.Errorf("DSN %s names no database (postgres://USER@HOST:PORT/DBNAME)", RedactDSN(dsn))
	}
	if u.Host == "" && u.Query().Get("host") == "" {
		return fmt.Errorf("DSN %s names no host (postgres://USER@HOST:PORT/DBNAME, or ?host=/socket/dir)", RedactDSN(dsn))
	}
	if q := u.Query(); q.Has(PoolMaxConnsParam) {
		if _, err := ParsePoolMaxConns(q.Get(PoolMaxConnsParam)); err != nil {
			return fmt.Errorf("DSN %s: %w", RedactDSN(dsn), err)
		}
	}
	return nil
}

// RedactDSN returns dsn with its password (user info or password=
// parameter) replaced by "xxxxx", for logs and daemon.info. A DSN that is
// not a postgres:// URL is redacted whole.
func RedactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "(DSN not shown: not a postgres:// URL)"
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// rebind turns the '?' placeholders of query into the driver's: unchanged
// on SQLite, $1, $2, … on PostgreSQL. Every statement of the store's API
// is written with '?'.
func (db *DB) rebind(query string) string {
	if db.drv != Postgres {
		return query
	}
	return sqlx.Rebind(sqlx.DOLLAR, query)
}

// BytePrefix is the SQL expression for the first n bytes (UTF-8) of the
// text expression expr, where n is an SQL expression too (e.g. "?"). On
// SQLite the result is TEXT, on PostgreSQL BYTEA (a cut may split a UTF-8
// sequence, which PostgreSQL text cannot hold); both scan into a Go string,
// which the caller trims to valid UTF-8. NULL stays NULL.
func (d Driver) BytePrefix(expr, n string) string {
	if d == Postgres {
		return fmt.Sprintf("substr(convert_to(%s, 'UTF8'), 1, %s)", expr, n)
	}
	return fmt.Sprintf("CAST(substr(CAST(%s AS BLOB), 1, %s) AS TEXT)", expr, n)
}

// ByteLength is the SQL expression for the length in bytes of the text
// expression expr (NULL stays NULL).
func (d Driver) ByteLength(expr string) string {
	if d == Postgres {
		return fmt.Sprintf("octet_length(%s)", expr)
	}
	return fmt.Sprintf("length(CAST(%s AS BLOB))", expr)
}

// SocketFiles returns the unix socket files through which dsn reaches
// PostgreSQL (a host that is a directory, e.g. ?host=/var/run/postgresql,
// gives DIR/.s.PGSQL.PORT), fallback hosts included; nil for TCP hosts or a
// DSN that does not parse. The sandbox puts them out of reach of terminal
// commands: a command that could connect to the daemon's database could
// approve its own commands.
func SocketFiles(dsn string) []string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil
	}
	var out []string
	add := func(host string, port uint16) {
		if strings.HasPrefix(host, "/") {
			out = append(out, filepath.Join(host, fmt.Sprintf(".s.PGSQL.%d", port)))
		}
	}
	add(cfg.Host, cfg.Port)
	for _, f := range cfg.Fallbacks {
		add(f.Host, f.Port)
	}
	return out
}

// ServerSocketFiles returns the unix socket files PostgreSQL listens on, as
// the server itself reports them (unix_socket_directories and port), so
// that the sandbox keeps every one out of reach, not only the DSN's: a
// server may listen in several directories (Fedora's default is
// '/run/postgresql, /tmp'). Relative directories are taken from the data
// directory; abstract ones ('@…') are skipped (the sandbox scopes abstract
// sockets). nil on SQLite.
func (db *DB) ServerSocketFiles(ctx context.Context) ([]string, error) {
	if db.Driver() != Postgres {
		return nil, nil
	}
	var row struct {
		Dirs    string `db:"dirs"`
		Port    string `db:"port"`
		DataDir string `db:"data_dir"`
	}
	// data_directory is readable by superusers and pg_read_all_settings only.
	err := db.Reads(ctx).Get(&row, `SELECT current_setting('unix_socket_directories') AS dirs, current_setting('port') AS port,
		COALESCE(current_setting('data_directory', true), '') AS data_dir`)
	if err != nil {
		return nil, err
	}
	return socketFilesOf(row.Dirs, row.Port, row.DataDir), nil
}

// socketFilesOf turns a unix_socket_directories value (comma-separated,
// entries optionally double-quoted) and a port into socket file paths.
func socketFilesOf(dirs, port, dataDir string) []string {
	var out []string
	for _, d := range strings.Split(dirs, ",") {
		d = strings.Trim(strings.TrimSpace(d), `"`)
		switch {
		case d == "" || strings.HasPrefix(d, "@"):
			continue
		case !filepath.IsAbs(d):
			if dataDir == "" {
				continue
			}
			d = filepath.Join(dataDir, d)
		}
		out = append(out, filepath.Join(d, ".s.PGSQL."+port))
	}
	return out
}
