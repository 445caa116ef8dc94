package store

import (
	"slices"
	"testing"
)

func TestSocketFiles(t *testing.T) {
	for _, c := range []struct {
		dsn  string
		want []string
	}{
		{"postgres://u@/db?host=/var/run/postgresql", []string{"/var/run/postgresql/.s.PGSQL.5432"}},
		{"postgres://u@/db?host=/tmp/pg&port=6543", []string{"/tmp/pg/.s.PGSQL.6543"}},
		{"postgres://u:secret@db.example:5432/db", nil},
		{"postgres://u@127.0.0.1/db", nil},
		{"postgres://u@/db?host=/a,/b", []string{"/a/.s.PGSQL.5432", "/b/.s.PGSQL.5432"}},
		{"postgres://u@/db?host=/a,10.0.0.1", []string{"/a/.s.PGSQL.5432"}},
		{"not a dsn", nil},
	} {
		if got := SocketFiles(c.dsn); !slices.Equal(got, c.want) {
			t.Errorf("SocketFiles(%q) = %q, want %q", c.dsn, got, c.want)
		}
	}
}
