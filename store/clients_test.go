package store

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"
)

// A pairing code is redeemed once, before it expires; expired unused codes
// are deleted, used ones kept.
func TestPairingCodeRows(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	now := time.Now()
	at := func(d time.Duration) string { return FormatTime(now.Add(d)) }
	scope := sql.NullString{String: "s1", Valid: true}
	if err := db.InTx(ctx, func(tx *Tx) error {
		for _, c := range []NewPairingCode{
			{CodeHash: "live", Label: "phone", SessionID: scope, ReadOnly: true, CreatedAt: at(0), ExpiresAt: at(time.Hour)},
			{CodeHash: "plain", CreatedAt: at(0), ExpiresAt: at(time.Hour)},
			{CodeHash: "stale", CreatedAt: at(-2 * time.Hour), ExpiresAt: at(-time.Hour)},
			{CodeHash: "stale-used", CreatedAt: at(-2 * time.Hour), ExpiresAt: at(-time.Hour)},
		} {
			if err := InsertPairingCode(tx, c); err != nil {
				return err
			}
		}
		_, err := tx.Exec(`UPDATE pairing_codes SET used_at = ?, client_id = 'cli_old' WHERE code_hash = 'stale-used'`, at(-90*time.Minute))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	use := func(hash, client string) (PairingCode, error) {
		var c PairingCode
		err := db.InTx(ctx, func(tx *Tx) error {
			var err error
			c, err = UsePairingCode(tx, hash, client, at(0))
			return err
		})
		return c, err
	}
	if c, err := use("live", "cli_1"); err != nil || c != (PairingCode{Label: "phone", SessionID: scope, ReadOnly: true}) {
		t.Fatalf("UsePairingCode(live) = %+v, %v", c, err)
	}
	if _, err := use("live", "cli_2"); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("UsePairingCode(live) again: %v, want sql.ErrNoRows", err)
	}
	var used struct {
		UsedAt   sql.NullString `db:"used_at"`
		ClientID sql.NullString `db:"client_id"`
	}
	if err := db.Get(ctx, &used, `SELECT used_at, client_id FROM pairing_codes WHERE code_hash = 'live'`); err != nil ||
		used.UsedAt.String != at(0) || used.ClientID.String != "cli_1" {
		t.Fatalf("the used code: %+v, %v", used, err)
	}
	if c, err := use("plain", "cli_3"); err != nil || c != (PairingCode{}) {
		t.Fatalf("UsePairingCode(plain) = %+v, %v", c, err)
	}
	for _, h := range []string{"stale", "nope"} {
		if _, err := use(h, "cli_4"); !errors.Is(err, sql.ErrNoRows) {
			t.Fatalf("UsePairingCode(%s): %v, want sql.ErrNoRows", h, err)
		}
	}
	if err := db.InTx(ctx, func(tx *Tx) error { return DeleteExpiredPairingCodes(tx, at(0)) }); err != nil {
		t.Fatal(err)
	}
	var left []string
	if err := db.Select(ctx, &left, `SELECT code_hash FROM pairing_codes ORDER BY code_hash`); err != nil ||
		len(left) != 3 || left[0] != "live" || left[1] != "plain" || left[2] != "stale-used" {
		t.Fatalf("after DeleteExpiredPairingCodes: %v, %v; want live, plain, stale-used", left, err)
	}
}

// A client is found by its token's hash until it is revoked; revoking
// again keeps the first time; the list is newest first.
func TestClientRows(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	scope := sql.NullString{String: "s1", Valid: true}
	if err := db.InTx(ctx, func(tx *Tx) error {
		if err := InsertClient(tx, NewClient{ClientID: "cli_a", Label: "laptop", TokenHash: "ha", CreatedAt: "2026-01-01T00:00:00.000Z"}); err != nil {
			return err
		}
		if err := InsertClient(tx, NewClient{ClientID: "cli_b", Label: "phone", TokenHash: "hb", SessionID: scope, ReadOnly: true,
			CreatedAt: "2026-01-02T00:00:00.000Z"}); err != nil {
			return err
		}
		// The same created_at: client_id breaks the tie.
		return InsertClient(tx, NewClient{ClientID: "cli_c", Label: "tablet", TokenHash: "hc", CreatedAt: "2026-01-02T00:00:00.000Z"})
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.InTx(ctx, func(tx *Tx) error {
		return InsertClient(tx, NewClient{ClientID: "cli_d", Label: "dup", TokenHash: "ha", CreatedAt: Now()})
	}); err == nil {
		t.Fatal("a second client with the same token hash was inserted")
	}
	c, err := ClientByTokenHash(db.Reads(ctx), "hb")
	if err != nil || c.ClientID != "cli_b" || c.Label != "phone" || c.TokenHash != "hb" || c.SessionID != scope || !c.ReadOnly ||
		c.LastUsedAt.Valid || c.RevokedAt.Valid {
		t.Fatalf("ClientByTokenHash(hb) = %+v, %v", c, err)
	}
	if _, err := ClientByTokenHash(db.Reads(ctx), "nope"); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("ClientByTokenHash(nope): %v, want sql.ErrNoRows", err)
	}
	const used = "2026-01-03T00:00:00.000Z"
	if err := db.InTx(ctx, func(tx *Tx) error { return TouchClient(tx, "cli_a", used) }); err != nil {
		t.Fatal(err)
	}
	if c, err := ClientByTokenHash(db.Reads(ctx), "ha"); err != nil || c.LastUsedAt.String != used || c.SessionID.Valid || c.ReadOnly {
		t.Fatalf("ClientByTokenHash(ha) after TouchClient = %+v, %v", c, err)
	}

	revoke := func(id, at string) error {
		return db.InTx(ctx, func(tx *Tx) error { return RevokeClient(tx, id, at) })
	}
	const first, second = "2026-01-04T00:00:00.000Z", "2026-01-05T00:00:00.000Z"
	if err := revoke("cli_b", first); err != nil {
		t.Fatal(err)
	}
	if _, err := ClientByTokenHash(db.Reads(ctx), "hb"); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("ClientByTokenHash of a revoked client: %v, want sql.ErrNoRows", err)
	}
	if err := revoke("cli_b", second); err != nil {
		t.Fatalf("revoking again: %v", err)
	}
	if err := revoke("cli_nope", first); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("RevokeClient(cli_nope): %v, want sql.ErrNoRows", err)
	}

	cs, err := ListClients(db.Reads(ctx))
	if err != nil || len(cs) != 3 {
		t.Fatalf("ListClients = %+v, %v", cs, err)
	}
	if cs[0].ClientID != "cli_c" || cs[1].ClientID != "cli_b" || cs[2].ClientID != "cli_a" {
		t.Fatalf("ListClients order: %s, %s, %s; want cli_c, cli_b, cli_a", cs[0].ClientID, cs[1].ClientID, cs[2].ClientID)
	}
	if cs[1].RevokedAt.String != first || !cs[1].ReadOnly || cs[1].SessionID != scope || cs[2].LastUsedAt.String != used || cs[0].RevokedAt.Valid {
		t.Fatalf("ListClients rows: %+v", cs)
	}
	if cs, err := ListClients(openTest(t, Options{}).Reads(ctx)); err != nil || len(cs) != 0 {
		t.Fatalf("ListClients of an empty store = %+v, %v", cs, err)
	}
}
