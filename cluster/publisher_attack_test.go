package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/fixtures/pgtest"
	"github.com/sessiond/sessiond/fixtures/storetest"
	"github.com/sessiond/sessiond/store"
)

// TestAttackClusterPublishSurvivesAFailedBatch: Publish announces events
// already committed (the event sink); it is the only announcement they
// get. When the batch's pg_notify transaction fails (the database briefly
// unreachable from this daemon), the announcement must still be sent once
// the database is back: otherwise the subscribers on the other daemons
// miss the session's last events for as long as it stays quiet.
func TestAttackClusterPublishSurvivesAFailedBatch(t *testing.T) {
	storetest.Only(t, store.Postgres)
	pg, err := pgtest.Shared()
	if err != nil {
		t.Fatal(err)
	}
	dsn := pg.NewDatabase(t)
	ctx := context.Background()
	openPG := func(app string) *store.DB {
		db, err := store.Open(ctx, "", store.Options{Driver: store.Postgres, DSN: dsn + "&application_name=" + app, BusyTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	sender, receiver := openPG("attackpub"), openPG("attacksub")
	got := make(chan string, 16)
	rbus := NewBus(receiver)
	defer rbus.Close()
	stop := rbus.Listen(ChannelEvents, func(p string) {
		if p != "" {
			got <- p
		}
	})
	defer stop()
	bus := NewBus(sender)
	defer bus.Close()

	var dbname string
	if err := receiver.Get(ctx, &dbname, `SELECT current_database()`); err != nil {
		t.Fatal(err)
	}
	if err := pg.Exec(ctx, `ALTER DATABASE "`+dbname+`" ALLOW_CONNECTIONS false`); err != nil {
		t.Fatal(err)
	}
	allowed := false
	allow := func() {
		if !allowed {
			allowed = true
			if err := pg.Exec(ctx, `ALTER DATABASE "`+dbname+`" ALLOW_CONNECTIONS true`); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(allow)
	if err := pg.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = 'attackpub' AND datname = $1`, dbname); err != nil {
		t.Fatal(err)
	}
	bus.Publish(ChannelEvents, "ses_x:7")
	fixtures.Eventually(t, 30*time.Second, "the batch fails", func() bool { return bus.pub.failures.Load() > 0 })
	allow()
	select {
	case p := <-got:
		if p != "ses_x:7" {
			t.Fatalf("got %q", p)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the announcement of a failed batch was never sent")
	}
}
