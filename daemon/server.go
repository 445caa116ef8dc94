package daemon

import (
	"crypto/subtle"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/sessiond/sessiond/rpc"
)

// Subprotocols of the /rpc upgrade (PROTOCOL.md section 2).
const (
	SubprotocolV1    = "sessiond.v1"
	TokenSubprotocol = "sessiond.token."
)

func (d *Daemon) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if !d.hostAllowed(r.Host) {
			http.Error(w, "forbidden host", http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if d.draining.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("draining\n"))
			return
		}
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /rpc", d.serveRPC)
	mux.HandleFunc("GET /pair", d.servePair)
	mux.HandleFunc("GET /metrics", d.serveMetrics)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not found: sessiond serves GET /rpc (WebSocket), GET /pair (WebSocket, pairing), GET /healthz and GET /metrics", http.StatusNotFound)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Every plain HTTP answer (a refusal, /healthz, a 404) ends its
		// connection: without the token a client gets its answer and
		// nothing more, and cannot pin the daemon's descriptors by
		// keeping refused connections alive. A WebSocket upgrade replaces
		// this header with "Connection: Upgrade".
		w.Header().Set("Connection", "close")
		// The Host check guards every path and method, not only GET /rpc
		// and GET /healthz: a page whose name was rebound to 127.0.0.1
		// must not learn, from a 404, that sessiond listens on this port.
		if !d.hostAllowed(r.Host) {
			http.Error(w, "forbidden host", http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// hostAllowed is the anti DNS-rebinding check: the Host header must name a
// loopback address, localhost, or a configured allowed_hosts entry.
func (d *Daemon) hostAllowed(hostport string) bool {
	host := hostport
	if h, port, err := net.SplitHostPort(hostport); err == nil {
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return false
		}
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, h := range d.cfg.AllowedHosts {
		if strings.EqualFold(h, host) {
			return true
		}
	}
	return false
}

func (d *Daemon) originAllowed(r *http.Request) bool {
	values, present := r.Header["Origin"]
	if !present {
		return true // not a browser
	}
	// A present Origin, even blank, must be listed.
	origin := strings.Join(values, ",")
	for _, o := range d.cfg.AllowedOrigins {
		if o == origin {
			return true
		}
	}
	return false
}

// authorized checks the bearer token or the sessiond.token.<t> subprotocol
// in constant time. A token in the URL query is never accepted.
func (d *Daemon) authorized(r *http.Request) bool {
	want := []byte(d.token)
	if auth := r.Header.Get("Authorization"); auth != "" {
		if tok, ok := strings.CutPrefix(auth, "Bearer "); ok &&
			subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), want) == 1 {
			return true
		}
	}
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			if tok, ok := strings.CutPrefix(strings.TrimSpace(p), TokenSubprotocol); ok &&
				subtle.ConstantTimeCompare([]byte(tok), want) == 1 {
				return true
			}
		}
	}
	return false
}

// browserGuard answers 403 and returns false unless r's Host names this
// daemon (anti DNS-rebinding) and its Origin, when present, is listed in
// allowed_origins. Every WebSocket endpoint (/rpc, /pair) calls it first.
func (d *Daemon) browserGuard(w http.ResponseWriter, r *http.Request) bool {
	if !d.hostAllowed(r.Host) {
		http.Error(w, "forbidden: Host must name a loopback address", http.StatusForbidden)
		return false
	}
	if !d.originAllowed(r) {
		http.Error(w, "forbidden: Origin not in allowed_origins", http.StatusForbidden)
		return false
	}
	return true
}

func (d *Daemon) serveRPC(w http.ResponseWriter, r *http.Request) {
	if !d.browserGuard(w, r) {
		return
	}
	ident, ok := d.authenticate(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sessiond"`)
		http.Error(w, "unauthorized: send the descriptor token (or a paired client's token) as Authorization: Bearer or the sessiond.token.<token> subprotocol", http.StatusUnauthorized)
		return
	}
	d.serveConn(w, r, d.mux, &ident)
}

// serveConn upgrades an authenticated /rpc request (ident set) or a /pair
// request (ident nil: no token, the pairing mux) and serves it.
func (d *Daemon) serveConn(w http.ResponseWriter, r *http.Request, mux *rpc.Mux, ident *identity) {
	if d.draining.Load() {
		http.Error(w, "draining: the daemon is stopping", http.StatusServiceUnavailable)
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols: []string{SubprotocolV1},
		// Origin was checked above against allowed_origins.
		InsecureSkipVerify: true,
	})
	if err != nil {
		d.log.Debug("websocket accept", "err", err)
		return
	}
	d.connMu.Lock()
	if d.draining.Load() {
		d.connMu.Unlock()
		ws.Close(websocket.StatusGoingAway, "daemon stopping")
		return
	}
	if len(d.conns) >= d.cfg.Limits.MaxConnections {
		d.connMu.Unlock()
		// 1013 Try Again Later: a clear refusal the client can back off on.
		ws.Close(websocket.StatusTryAgainLater, "overloaded: too many connections (limits.max_connections); retry with backoff")
		return
	}
	if ident != nil && ident.ClientID != "" && d.revoked[ident.ClientID] {
		// Revoked between its authentication and now.
		d.connMu.Unlock()
		ws.Close(websocket.StatusPolicyViolation, "revoked: paired client "+ident.ClientID+" was revoked by the owner")
		return
	}
	if ident == nil && d.pairConns >= maxPairConns {
		// Tokenless connections are few, so they never crowd out clients.
		d.connMu.Unlock()
		ws.Close(websocket.StatusTryAgainLater, "overloaded: too many pairing connections; retry with backoff")
		return
	}
	// The Conn exists only once admitted: a refused one would leave its
	// context and close hook hanging off the daemon's until it stops.
	c := rpc.NewConn(d.ctx, ws, mux, rpc.Options{
		MaxMessageBytes: d.cfg.Limits.MaxMessageBytes,
		SendQueue:       d.cfg.Limits.SendQueue,
		MaxInFlight:     d.cfg.Limits.MaxInFlight,
		Logger:          d.log,
	})
	if ident != nil {
		c.SetValue(identKey, *ident)
	} else {
		d.pairConns++
	}
	c.SetValue(peerKey, hostOnly(r.RemoteAddr))
	d.conns[c] = struct{}{}
	d.connWG.Add(1)
	d.connMu.Unlock()
	if ident == nil {
		// A pairing connection lives pairConnLifetime at most. OnClose
		// is registered outside connMu: it runs f at once on a conn
		// that already ended.
		t := time.AfterFunc(pairConnLifetime, func() {
			c.Close(websocket.StatusPolicyViolation, "pairing window over: reconnect to /pair")
		})
		c.OnClose(func() {
			t.Stop()
			d.connMu.Lock()
			d.pairConns--
			d.connMu.Unlock()
		})
	}
	d.log.Debug("connection opened", "conn", numberConn(c), "remote", r.RemoteAddr)
	// The connection is hijacked: serve it from its own goroutine and let
	// the HTTP handler return, so that net/http's request, response and
	// deep serving stack are not kept alive for the connection's lifetime
	// (about 10 KB per idle connection; docs/performance.md).
	go func() {
		defer func() {
			d.connMu.Lock()
			delete(d.conns, c)
			d.connMu.Unlock()
			d.connWG.Done()
		}()
		c.Serve()
	}()
}
