package store

import (
	"database/sql"
	"strings"
)

// The rows of paired clients (PROTOCOL.md section 2): pairing_codes and
// clients. Codes and tokens are stored as the caller's hashes; what a code
// or a scope means is package daemon's.

// NewPairingCode is the pairing_codes row InsertPairingCode writes.
type NewPairingCode struct {
	CodeHash             string
	Label                string
	SessionID            sql.NullString // scope_session_id, NULL: every session
	ReadOnly             bool
	CreatedAt, ExpiresAt string
}

// DeleteExpiredPairingCodes deletes, in tx, the unused codes that expired
// before now.
func DeleteExpiredPairingCodes(tx *Tx, now string) error {
	_, err := tx.Exec(`DELETE FROM pairing_codes WHERE used_at IS NULL AND expires_at < ?`, now)
	return err
}

// InsertPairingCode inserts c in tx.
func InsertPairingCode(tx *Tx, c NewPairingCode) error {
	_, err := tx.Exec(`INSERT INTO pairing_codes (code_hash, label, scope_session_id, read_only, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?)`, c.CodeHash, c.Label, c.SessionID, boolInt(c.ReadOnly), c.CreatedAt, c.ExpiresAt)
	return err
}

// PairingCode is what a redeemed pairing_codes row grants.
type PairingCode struct {
	Label     string         `db:"label"`
	SessionID sql.NullString `db:"scope_session_id"`
	ReadOnly  bool           `db:"read_only"`
}

// UsePairingCode marks the code of codeHash used at now by clientID, in
// tx, if it is unused and expires after now, and returns it; sql.ErrNoRows
// when there is no such code. The check and the claim are one statement,
// so two redemptions cannot both win.
func UsePairingCode(tx *Tx, codeHash, clientID, now string) (PairingCode, error) {
	var c PairingCode
	err := tx.Get(&c, `UPDATE pairing_codes SET used_at = ?, client_id = ?
		WHERE code_hash = ? AND used_at IS NULL AND expires_at > ?
		RETURNING label, scope_session_id, read_only`, now, clientID, codeHash, now)
	return c, err
}

// Client is one clients row.
type Client struct {
	ClientID   string         `db:"client_id"`
	Label      string         `db:"label"`
	TokenHash  string         `db:"token_hash"`
	SessionID  sql.NullString `db:"scope_session_id"` // NULL: every session
	ReadOnly   bool           `db:"read_only"`
	CreatedAt  string         `db:"created_at"`
	LastUsedAt sql.NullString `db:"last_used_at"`
	RevokedAt  sql.NullString `db:"revoked_at"`
}

const clientColumns = `client_id, label, token_hash, scope_session_id, read_only, created_at, last_used_at, revoked_at`

// NewClient is the clients row InsertClient writes.
type NewClient struct {
	ClientID, Label, TokenHash string
	SessionID                  sql.NullString // NULL: every session
	ReadOnly                   bool
	CreatedAt                  string
}

// InsertClient inserts c in tx.
func InsertClient(tx *Tx, c NewClient) error {
	_, err := tx.Exec(`INSERT INTO clients (client_id, label, token_hash, scope_session_id, read_only, created_at)
		VALUES (?, ?, ?, ?, ?, ?)`, c.ClientID, c.Label, c.TokenHash, c.SessionID, boolInt(c.ReadOnly), c.CreatedAt)
	return err
}

// ClientByTokenHash reads the client that is not revoked whose token_hash
// is hash; sql.ErrNoRows when there is none.
func ClientByTokenHash(q Queryer, hash string) (Client, error) {
	var c Client
	err := q.Get(&c, `SELECT `+clientColumns+` FROM clients WHERE token_hash = ? AND revoked_at IS NULL`, hash)
	return c, err
}

// TouchClient sets the last_used_at of clientID to at, in tx.
func TouchClient(tx *Tx, clientID, at string) error {
	_, err := tx.Exec(`UPDATE clients SET last_used_at = ? WHERE client_id = ?`, at, clientID)
	return err
}

// ListClients reads every client, revoked ones included, newest first
// (created_at, then client_id, descending).
func ListClients(q Queryer) ([]Client, error) {
	var cs []Client
	err := q.Select(&cs, `SELECT `+clientColumns+` FROM clients ORDER BY created_at DESC, client_id DESC`)
	return cs, err
}

// RevokeClient sets the revoked_at of clientID to at, in tx, unless it is
// revoked already (the first revocation's time stays); sql.ErrNoRows when
// there is no such client.
func RevokeClient(tx *Tx, clientID, at string) error {
	var id string
	return tx.Get(&id, `UPDATE clients SET revoked_at = coalesce(revoked_at, ?) WHERE client_id = ? RETURNING client_id`, at, clientID)
}

// boolInt is the 0/1 of the INTEGER flag columns (read_only), which are
// integers on both drivers.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// RevokedClients returns those of ids (client ids) whose client is
// revoked: a daemon asks it for the paired clients it has connections of,
// since another daemon of the cluster may have revoked one.
func RevokedClients(q Queryer, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var out []string
	// One query for a bounded list: at most maxRevokedQuery ids a call.
	for len(ids) > 0 {
		n := min(len(ids), maxRevokedQuery)
		args := make([]any, n)
		for i, id := range ids[:n] {
			args[i] = id
		}
		var got []string
		if err := q.Select(&got, `SELECT client_id FROM clients WHERE revoked_at IS NOT NULL AND client_id IN (?`+strings.Repeat(", ?", n-1)+`)`, args...); err != nil {
			return nil, err
		}
		out = append(out, got...)
		ids = ids[n:]
	}
	return out, nil
}

// maxRevokedQuery bounds the ids of one RevokedClients query (SQLite's
// bound on parameters is 32766).
const maxRevokedQuery = 500
