package daemon

// Paired clients (issue 18; PROTOCOL.md section 2, docs/protocol.md
// "Paired clients"): one-time pairing codes, per-client tokens stored as
// SHA-256 hashes, scopes (one session, read-only), revocation, and the
// sender recorded with every admission and decision.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
	"github.com/sessiond/sessiond/store"
)

// Pairing bounds.
const (
	// TokenPrefix starts every paired client's token.
	TokenPrefix = "sdp_"
	// pairingAlphabet: no 0/O, 1/I/L, U. A code is codeLen characters (50
	// bits), shown as two groups of five; guesses are bounded by the TTL
	// and pairFailures per peer per pairWindow.
	pairingAlphabet = "ABCDEFGHJKMNPQRSTVWXYZ23456789"
	codeLen         = 10
	defaultCodeTTL  = 10 * time.Minute
	maxCodeTTL      = 24 * time.Hour
	maxLabelLen     = 128
	pairFailures    = 5
	pairWindow      = time.Minute
	// maxPairConns bounds the open GET /pair connections (they carry no
	// token), pairConnLifetime how long each may stay.
	maxPairConns     = 8
	pairConnLifetime = 2 * time.Minute
	identKey         = "identity"
)

// identity is who a connection's token names; nil value (no identKey) is
// the owner, as is an identity with an empty ClientID.
type identity struct {
	ClientID  string // "" for the daemon token's owner
	Label     string
	SessionID string // scope: "" for every session
	ReadOnly  bool
}

func identOf(c *rpc.Conn) identity {
	if c == nil {
		return identity{}
	}
	if v, ok := c.Value(identKey); ok {
		return v.(identity)
	}
	return identity{}
}

// sender is the Sender of what c does: the paired client (or the owner)
// with the client name and version of initialize.
func sender(c *rpc.Conn) protocol.Sender {
	id := identOf(c)
	s := protocol.Sender{ID: protocol.SenderOwner}
	if id.ClientID != "" {
		s.ID, s.Label = id.ClientID, id.Label
	}
	if c != nil {
		if v, ok := c.Value(clientKey); ok {
			if ci, ok := v.(protocol.ClientInfo); ok {
				s.Client, s.Version = ci.Name, ci.Version
			}
		}
	}
	return s
}

func senderJSON(c *rpc.Conn) json.RawMessage {
	b, _ := json.Marshal(sender(c))
	return b
}

func hashSecret(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// normalizeCode upper-cases a code and drops separators, so "abcde-fghjk"
// and "ABCDEFGHJK" are the same code.
func normalizeCode(code string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(code) {
		if r == '-' || r == ' ' {
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func newCode() string {
	buf := make([]byte, codeLen)
	out := make([]byte, codeLen)
	rand.Read(buf)
	for i := range buf {
		// 256 % 30 != 0: reject the biased tail.
		for buf[i] >= byte(256-256%len(pairingAlphabet)) {
			rand.Read(buf[i : i+1])
		}
		out[i] = pairingAlphabet[int(buf[i])%len(pairingAlphabet)]
	}
	return string(out[:5]) + "-" + string(out[5:])
}

func newToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// presentedToken is the token of the upgrade: the bearer token or the
// sessiond.token.<t> subprotocol (never the URL).
func presentedToken(r *http.Request) string {
	if auth := r.Header.Get("Authorization"); auth != "" {
		if tok, ok := strings.CutPrefix(auth, "Bearer "); ok {
			return strings.TrimSpace(tok)
		}
	}
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			if tok, ok := strings.CutPrefix(strings.TrimSpace(p), TokenSubprotocol); ok {
				return tok
			}
		}
	}
	return ""
}

// authenticate names the holder of the upgrade's token: the owner (the
// daemon token, compared in constant time) or a paired client that is not
// revoked (looked up by the token's SHA-256, whose stored hash is then
// compared in constant time; last_used_at is stamped). ok is false for no
// token or a wrong or revoked one.
func (d *Daemon) authenticate(r *http.Request) (id identity, ok bool) {
	if d.authorized(r) {
		return identity{}, true
	}
	tok := presentedToken(r)
	if !strings.HasPrefix(tok, TokenPrefix) {
		return identity{}, false
	}
	h := hashSecret(tok)
	row, err := store.ClientByTokenHash(d.db.Reads(r.Context()), h)
	if err != nil {
		if !errors.Is(err, sql.ErrNoRows) {
			d.log.Warn("paired token lookup failed", "err", err)
		}
		return identity{}, false
	}
	if subtle.ConstantTimeCompare([]byte(row.TokenHash), []byte(h)) != 1 {
		return identity{}, false
	}
	if err := d.db.InTx(r.Context(), func(tx *store.Tx) error {
		tx.Label("client.touch")
		return store.TouchClient(tx, row.ClientID, store.Now())
	}); err != nil {
		d.log.Warn("paired client last_used_at not recorded", "client_id", row.ClientID, "err", err)
	}
	return identity{ClientID: row.ClientID, Label: row.Label, SessionID: row.SessionID.String, ReadOnly: row.ReadOnly}, true
}

// pairRoutes is the mux of GET /pair: initialize and the pairing-scope
// methods (auth.pair); every other method of protocol.Methods is refused
// with forbidden. The error says which of those has no handler bound.
func (d *Daemon) pairRoutes() (*rpc.Mux, error) {
	m := rpc.NewMux()
	rpc.Bind(m, protocol.MethodInitialize, d.initialize)
	rpc.Bind(m, protocol.MethodPair, d.pair)
	if err := m.CheckTable(pairMethods()); err != nil {
		return nil, fmt.Errorf("GET /pair: %w", err)
	}
	for _, spec := range protocol.Methods {
		if _, ok := m.Handler(spec.Name); ok {
			continue
		}
		name := spec.Name
		m.Handle(name, func(context.Context, *rpc.Conn, json.RawMessage) (any, error) {
			return nil, protocol.Errorf(protocol.ReasonForbidden, "%s is not available on /pair: only initialize and auth.pair; reconnect to /rpc with the token auth.pair returns", name)
		})
	}
	m.Wrap(func(_ string, h rpc.Handler) rpc.Handler { return wireHandler(h) })
	return m, nil
}

// pairMethods are the rows GET /pair serves: initialize and every method
// of scope pairing.
func pairMethods() []protocol.MethodSpec {
	init, _ := protocol.Method(protocol.MethodInitialize)
	out := []protocol.MethodSpec{init}
	for _, m := range protocol.Methods {
		if m.Scope == protocol.ScopePairing {
			out = append(out, m)
		}
	}
	return out
}

func (d *Daemon) servePair(w http.ResponseWriter, r *http.Request) {
	if !d.browserGuard(w, r) {
		return
	}
	d.serveConn(w, r, d.pairMux, nil)
}

// pairingCode is auth.pairing_code (owner only).
func (d *Daemon) pairingCode(ctx context.Context, c *rpc.Conn, p protocol.PairingCodeParams) (protocol.PairingCodeResult, error) {
	ttl := defaultCodeTTL
	if p.TTLSeconds < 0 || time.Duration(p.TTLSeconds)*time.Second > maxCodeTTL {
		return protocol.PairingCodeResult{}, protocol.InvalidParams("ttl_seconds", "must be 1..%d", int(maxCodeTTL/time.Second))
	} else if p.TTLSeconds > 0 {
		ttl = time.Duration(p.TTLSeconds) * time.Second
	}
	if err := validLabel(p.Label); err != nil {
		return protocol.PairingCodeResult{}, err
	}
	if p.SessionID != "" {
		if _, err := getSession(d.db.Reads(ctx), p.SessionID); err != nil {
			return protocol.PairingCodeResult{}, wireErr(err)
		}
	}
	code := newCode()
	now := time.Now()
	expires := store.FormatTime(now.Add(ttl))
	err := d.db.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("pairing.code")
		// Expired codes are of no use: drop them as new ones are made.
		if err := store.DeleteExpiredPairingCodes(tx, store.FormatTime(now)); err != nil {
			return err
		}
		return store.InsertPairingCode(tx, store.NewPairingCode{CodeHash: hashSecret(normalizeCode(code)), Label: p.Label,
			SessionID: sql.NullString{String: p.SessionID, Valid: p.SessionID != ""}, ReadOnly: p.ReadOnly,
			CreatedAt: store.FormatTime(now), ExpiresAt: expires})
	})
	if err != nil {
		return protocol.PairingCodeResult{}, wireErr(err)
	}
	d.audit().Info("pairing code issued", append(connAttrs(c), "label", p.Label, "scope_session_id", p.SessionID,
		"read_only", p.ReadOnly, "expires_at", expires)...)
	return protocol.PairingCodeResult{Code: code, ExpiresAt: expires}, nil
}

// reservedLabels are the names the owner's own inputs are shown by: a
// paired client may not take one (sessionctl shows "you › " for the owner).
var reservedLabels = []string{"you", "owner", protocol.SenderOwner}

func validLabel(l string) error {
	if len(l) > maxLabelLen {
		return protocol.InvalidParams("label", "at most %d bytes", maxLabelLen)
	}
	for _, r := range reservedLabels {
		if strings.EqualFold(strings.TrimSpace(l), r) {
			return protocol.InvalidParams("label", "%q names the owner: choose another label", l)
		}
	}
	for _, r := range l {
		if r < 0x20 || r == 0x7f {
			return protocol.InvalidParams("label", "must not contain control characters")
		}
	}
	return nil
}

// errBadCode is the one answer to an unknown, used or expired code, so
// that a guesser learns nothing about which.
var errBadCode = protocol.Errorf(protocol.ReasonForbidden, "pairing code unknown, already used or expired: ask the owner for a new one (sessionctl pair)")

// pair is auth.pair (GET /pair only): it redeems a code once and creates
// the paired client.
func (d *Daemon) pair(ctx context.Context, c *rpc.Conn, p protocol.PairParams) (protocol.PairResult, error) {
	if err := required("code", p.Code); err != nil {
		return protocol.PairResult{}, err
	}
	if err := validLabel(p.Label); err != nil {
		return protocol.PairResult{}, err
	}
	peer := peerOf(c)
	// An attempt counts as failed from its start (reserve), and is given
	// back when the code was good: concurrent guesses on one connection
	// cannot all pass the check before any failure is counted.
	if !d.pairLimit.reserve(peer, time.Now()) {
		return protocol.PairResult{}, protocol.Errorf(protocol.ReasonOverloaded, "too many failed pairing attempts from this peer; retry in a minute")
	}
	code := normalizeCode(p.Code)
	if len(code) != codeLen {
		return protocol.PairResult{}, errBadCode
	}
	token := newToken()
	out := protocol.PairResult{ClientID: "cli_" + uuid.Must(uuid.NewV7()).String(), Token: token}
	err := d.db.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("pair")
		now := store.Now()
		// Single use: the code is claimed in the same statement that
		// checks it, so two redemptions cannot both win.
		row, err := store.UsePairingCode(tx, hashSecret(code), out.ClientID, now)
		if errors.Is(err, sql.ErrNoRows) {
			return errBadCode
		} else if err != nil {
			return err
		}
		out.Label = row.Label
		if p.Label != "" {
			out.Label = p.Label
		}
		if out.Label == "" {
			out.Label = "paired client"
			if name := sender(c).Client; name != "" && validLabel(name) == nil {
				out.Label = name
			}
		}
		return store.InsertClient(tx, store.NewClient{ClientID: out.ClientID, Label: out.Label, TokenHash: hashSecret(token),
			SessionID: row.SessionID, ReadOnly: row.ReadOnly, CreatedAt: now})
	})
	if err != nil {
		if errors.Is(err, errBadCode) {
			d.audit().Warn("pairing refused: bad code", append(connAttrs(c), "peer", peer)...)
		} else {
			d.pairLimit.refund(peer) // the store failed, not the guess
		}
		return protocol.PairResult{}, wireErr(err)
	}
	d.pairLimit.refund(peer)
	d.audit().Info("client paired", append(connAttrs(c), "client_id", out.ClientID, "label", out.Label, "peer", peer)...)
	return out, nil
}

// clientsList is clients.list (owner only): every paired client, newest
// first, revoked ones included.
func (d *Daemon) clientsList(ctx context.Context, c *rpc.Conn, p protocol.ClientsListParams) (protocol.ClientsList, error) {
	rows, err := store.ListClients(d.db.Reads(ctx))
	if err != nil {
		return protocol.ClientsList{}, wireErr(err)
	}
	out := protocol.ClientsList{Clients: make([]protocol.PairedClient, 0, len(rows))}
	for _, r := range rows {
		out.Clients = append(out.Clients, protocol.PairedClient{ClientID: r.ClientID, Label: r.Label, SessionID: r.SessionID.String,
			ReadOnly: r.ReadOnly, CreatedAt: r.CreatedAt, LastUsedAt: r.LastUsedAt.String, RevokedAt: r.RevokedAt.String})
	}
	return out, nil
}

// clientsRevoke is clients.revoke (owner only): the token is refused from
// now on and the client's open connections are closed with 1008.
// Revoking a revoked client again is not an error (revoked stays true,
// closed 0); an unknown id is not_found.
func (d *Daemon) clientsRevoke(ctx context.Context, c *rpc.Conn, p protocol.ClientRef) (protocol.RevokeResult, error) {
	if err := required("client_id", p.ClientID); err != nil {
		return protocol.RevokeResult{}, err
	}
	err := d.db.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("client.revoke")
		err := store.RevokeClient(tx, p.ClientID, store.Now())
		if errors.Is(err, sql.ErrNoRows) {
			return protocol.Errorf(protocol.ReasonNotFound, "no paired client %s (see clients.list)", p.ClientID)
		}
		return err
	})
	if err != nil {
		return protocol.RevokeResult{}, wireErr(err)
	}
	var victims []*rpc.Conn
	d.connMu.Lock()
	d.revoked[p.ClientID] = true
	for conn := range d.conns {
		if identOf(conn).ClientID == p.ClientID {
			victims = append(victims, conn)
		}
	}
	d.connMu.Unlock()
	for _, conn := range victims {
		conn.Close(websocket.StatusPolicyViolation, "revoked: paired client "+p.ClientID+" was revoked by the owner")
	}
	d.audit().Warn("paired client revoked", append(connAttrs(c), "client_id", p.ClientID, "closed", len(victims))...)
	return protocol.RevokeResult{ClientID: p.ClientID, Revoked: true, Closed: len(victims)}, nil
}

// revocationEvery is how often a daemon asks the store whether a paired
// client it has connections of was revoked (by another daemon of the
// cluster: this one closes its own at once).
const revocationEvery = 2 * time.Second

// revocationSweep closes, until ctx ends, the connections of paired
// clients revoked elsewhere: every revocationEvery it reads which of the
// connected clients are revoked in the store (one query, none when no
// paired client is connected).
func (d *Daemon) revocationSweep(ctx context.Context) {
	t := time.NewTicker(revocationEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d.connMu.Lock()
		var ids []string
		seen := map[string]bool{}
		for conn := range d.conns {
			if id := identOf(conn).ClientID; id != "" && !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		d.connMu.Unlock()
		if len(ids) == 0 {
			continue
		}
		revoked, err := store.RevokedClients(d.db.Reads(ctx), ids)
		if err != nil {
			continue // the store is away: the next sweep asks again
		}
		for _, id := range revoked {
			var victims []*rpc.Conn
			d.connMu.Lock()
			d.revoked[id] = true
			for conn := range d.conns {
				if identOf(conn).ClientID == id {
					victims = append(victims, conn)
				}
			}
			d.connMu.Unlock()
			for _, conn := range victims {
				conn.Close(websocket.StatusPolicyViolation, "revoked: paired client "+id+" was revoked by the owner")
			}
			if len(victims) > 0 {
				d.audit().Warn("paired client revoked elsewhere: its connections here are closed", "client_id", id, "closed", len(victims))
			}
		}
	}
}

func peerOf(c *rpc.Conn) string {
	if c == nil {
		return "?"
	}
	if v, ok := c.Value(peerKey); ok {
		return v.(string)
	}
	return "?"
}

const peerKey = "peer"

// pairLimiter bounds failed auth.pair attempts per peer address: at most
// pairFailures in a pairWindow.
type pairLimiter struct {
	mu    sync.Mutex
	peers map[string]*pairWindowState
}

type pairWindowState struct {
	start    time.Time
	failures int
}

// reserve counts one attempt of peer as failed, unless pairFailures have
// failed in its window already (false: refused, nothing counted).
func (l *pairLimiter) reserve(peer string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st := l.peers[peer]; st != nil && now.Sub(st.start) < pairWindow && st.failures >= pairFailures {
		return false
	}
	l.failLocked(peer, now)
	return true
}

// refund gives back an attempt reserved by peer that did not fail.
func (l *pairLimiter) refund(peer string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st := l.peers[peer]; st != nil && st.failures > 0 {
		st.failures--
	}
}

func (l *pairLimiter) failLocked(peer string, now time.Time) {
	if l.peers == nil {
		l.peers = map[string]*pairWindowState{}
	}
	for k, st := range l.peers { // keep the map small
		if now.Sub(st.start) >= pairWindow {
			delete(l.peers, k)
		}
	}
	st := l.peers[peer]
	if st == nil {
		st = &pairWindowState{start: now}
		l.peers[peer] = st
	}
	st.failures++
}

// guard enforces a paired client's scope, read from the method's row of
// protocol.Methods, before h; the owner passes untouched. Every paired
// client is refused (forbidden) the owner methods, and a method that is
// not a row (fail closed); a read-only one every write method. A
// session-scoped client (docs/protocol.md, Part 2, I) is refused a
// daemon-wide write (session.create; approvals.revoke of an "always"
// rule, i.e. without session_id), and any other session is not_found to
// it; daemon-wide reads pass (session.list lists its session only).
func guard(spec protocol.MethodSpec, h rpc.Handler) rpc.Handler {
	return func(ctx context.Context, c *rpc.Conn, params json.RawMessage) (any, error) {
		id := identOf(c)
		if id.ClientID == "" {
			return h(ctx, c, params)
		}
		switch spec.Scope {
		case protocol.ScopeRead:
		case protocol.ScopeWrite:
			if id.ReadOnly {
				return nil, protocol.Errorf(protocol.ReasonForbidden, "paired client %s is read-only: %s is not allowed", id.ClientID, spec.Name)
			}
		default: // owner; pairing and unknown methods are never a paired client's
			return nil, protocol.Errorf(protocol.ReasonForbidden, "%s needs the daemon's own token; paired client %s may not call it", spec.Name, id.ClientID)
		}
		if id.SessionID == "" {
			return h(ctx, c, params)
		}
		reach := spec.SessionReach()
		var p struct {
			SessionID string `json:"session_id"`
		}
		if reach != protocol.ReachDaemon {
			_ = json.Unmarshal(params, &p) // a bad shape is the handler's to report
		}
		daemonWide := reach == protocol.ReachDaemon || (reach == protocol.ReachSessionOrDaemon && p.SessionID == "")
		if daemonWide && spec.Scope == protocol.ScopeWrite {
			return nil, beyondSession(spec.Name, id)
		}
		if p.SessionID != "" && p.SessionID != id.SessionID {
			return nil, protocol.Errorf(protocol.ReasonNotFound, "session not found: %s", p.SessionID)
		}
		return h(ctx, c, params)
	}
}

// beyondSession is the refusal of a daemon-wide write to a session-scoped
// paired client.
func beyondSession(method string, id identity) error {
	switch method {
	case protocol.MethodSessionCreate:
		return protocol.Errorf(protocol.ReasonForbidden, "paired client %s is limited to session %s and cannot create sessions", id.ClientID, id.SessionID)
	case protocol.MethodApprovalsRevoke:
		return protocol.Errorf(protocol.ReasonForbidden, "paired client %s is limited to session %s: it cannot revoke an \"always\" rule", id.ClientID, id.SessionID)
	}
	return protocol.Errorf(protocol.ReasonForbidden, "paired client %s is limited to session %s: %s acts beyond it", id.ClientID, id.SessionID, method)
}

// hostOnly strips the port of a RemoteAddr.
func hostOnly(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
