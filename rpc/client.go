package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/sessiond/sessiond/protocol"
)

// Subprotocol is the WebSocket subprotocol of sessiond's JSON-RPC
// (PROTOCOL.md section 2). The server selects it.
const Subprotocol = "sessiond.v1"

// TokenSubprotocolPrefix prefixes the token when a client that cannot set
// headers (a browser) sends it as a second subprotocol.
const TokenSubprotocolPrefix = "sessiond.token."

// Client defaults.
const (
	// DefaultClientReadLimit bounds one frame read by a Client (64 MiB): a
	// snapshot carries the whole transcript.
	DefaultClientReadLimit = 64 << 20
	// DefaultNotificationQueue bounds notifications a Client queues for a
	// consumer that reads Notifications.
	DefaultNotificationQueue = 4096
	// DefaultWriteTimeout bounds one frame write of a Client.
	DefaultWriteTimeout = 10 * time.Second
)

// DialOptions configure Dial.
type DialOptions struct {
	// Token is the descriptor's token (HOME/daemon.json). It is sent as
	// "Authorization: Bearer TOKEN", or as the subprotocol
	// "sessiond.token.TOKEN" when TokenAsSubprotocol is set.
	Token              string
	TokenAsSubprotocol bool
	// Header holds extra upgrade headers.
	Header http.Header
	// HTTPClient does the upgrade request; nil means a client that never
	// uses a proxy (the daemon listens on loopback).
	HTTPClient *http.Client
	// ReadLimit bounds one incoming frame in bytes; a bigger frame closes
	// the connection with 1009. Zero means DefaultClientReadLimit.
	ReadLimit int64
	// OnNotification, when set, is called for every server notification on
	// the reading goroutine, in arrival order. It must return quickly (hand
	// the notification over, don't call the Client and wait): responses are
	// read by the same goroutine. When nil, notifications are queued for
	// Notifications.
	OnNotification func(Notification)
	// NotificationQueue bounds the notifications queued for Notifications.
	// When the consumer falls that far behind, the client closes the
	// connection with 1008 (like the daemon does with slow clients); the
	// consumer then reconnects and resumes from its last event seq. Zero
	// means DefaultNotificationQueue.
	NotificationQueue int
	// VisibleStrings, when set, applies protocol.Visible to every string of
	// results and notification params, and to the strings of JSON held in
	// a string (tool-call arguments, tool results; protocol.VisibleJSON),
	// for clients that print what they receive on a terminal (sessionctl):
	// escape sequences a model or another client put there are shown,
	// never interpreted. Error responses are left as they are.
	VisibleStrings bool
	// WriteTimeout bounds one frame write; zero means DefaultWriteTimeout.
	// A call's own context bounds only the wait for its response, so
	// cancelling one call never tears the connection down.
	WriteTimeout time.Duration
}

// Notification is a server-to-client message without id, e.g.
// session.event (decode Params into an Event).
type Notification struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// DialError is a failed connection attempt. StatusCode is the HTTP status
// of a refused upgrade (401 for a missing or wrong token, 403 for a refused
// Origin or Host, 503 while the daemon drains), or 0 when no HTTP response
// came (nothing listens, timeout).
type DialError struct {
	URL        string
	StatusCode int
	Err        error
}

func (e *DialError) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("connect to %s: HTTP %d %s", e.URL, e.StatusCode, http.StatusText(e.StatusCode))
	}
	return fmt.Sprintf("connect to %s: %v", e.URL, e.Err)
}

func (e *DialError) Unwrap() error { return e.Err }

// ErrClosed matches (errors.Is) every *ClosedError.
var ErrClosed = errors.New("rpc: connection closed")

// ClosedError says why a Client's connection ended. Status is the
// WebSocket close status the server sent (1000 normal, 1001 daemon
// stopping, 1008 too slow, 1009 frame too big), or -1 when the connection
// broke without a close frame.
type ClosedError struct {
	Status websocket.StatusCode
	Reason string
	Err    error
}

func (e *ClosedError) Error() string {
	switch {
	case e.Status >= 0 && e.Reason != "":
		return fmt.Sprintf("connection closed (%d %s: %s)", int(e.Status), e.Status, e.Reason)
	case e.Status >= 0:
		return fmt.Sprintf("connection closed (%d %s)", int(e.Status), e.Status)
	case e.Err != nil:
		return fmt.Sprintf("connection lost: %v", e.Err)
	}
	return "connection closed"
}

func (e *ClosedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrClosed) true.
func (e *ClosedError) Is(target error) bool { return target == ErrClosed }

type clientResponse struct {
	result json.RawMessage
	err    *protocol.Error
}

// Client is the client side of sessiond's JSON-RPC over WebSocket: Call
// sends a request and waits for the response with the same id (calls may
// run concurrently from any goroutine), notifications go to a callback or a
// bounded queue, and Err tells how the connection ended.
type Client struct {
	ws     *websocket.Conn
	opt    DialOptions
	nextID atomic.Int64

	mu      sync.Mutex
	pending map[int64]chan clientResponse
	closed  *ClosedError // set once the reader ended

	// notification queue (when OnNotification is nil)
	qmu    sync.Mutex
	queue  []Notification
	qwake  chan struct{}
	notes  chan Notification
	qclose bool

	done      chan struct{}
	stop      chan struct{} // closed by Close: the pump stops delivering
	stopOnce  sync.Once
	closeOnce sync.Once
	closeMu   sync.Mutex
	ownClose  *ClosedError
}

// Dial opens a connection to url (ws://HOST:PORT/rpc) with the token and
// the sessiond.v1 subprotocol. A refused upgrade is a *DialError carrying
// the HTTP status; a server that does not select sessiond.v1 is refused.
func Dial(ctx context.Context, url string, opt DialOptions) (*Client, error) {
	header := http.Header{}
	for k, v := range opt.Header {
		header[k] = append([]string(nil), v...)
	}
	protocols := []string{Subprotocol}
	if opt.Token != "" {
		if opt.TokenAsSubprotocol {
			protocols = append(protocols, TokenSubprotocolPrefix+opt.Token)
		} else {
			header.Set("Authorization", "Bearer "+opt.Token)
		}
	}
	hc := opt.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: &http.Transport{Proxy: nil}}
	}
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		HTTPClient: hc, HTTPHeader: header, Subprotocols: protocols,
	})
	if err != nil {
		de := &DialError{URL: url, Err: err}
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			de.StatusCode = resp.StatusCode
		}
		return nil, de
	}
	if ws.Subprotocol() != Subprotocol {
		ws.Close(websocket.StatusProtocolError, "sessiond.v1 required")
		return nil, &DialError{URL: url, Err: fmt.Errorf("server selected subprotocol %q, not %q", ws.Subprotocol(), Subprotocol)}
	}
	if opt.ReadLimit == 0 {
		opt.ReadLimit = DefaultClientReadLimit
	}
	if opt.NotificationQueue <= 0 {
		opt.NotificationQueue = DefaultNotificationQueue
	}
	if opt.WriteTimeout <= 0 {
		opt.WriteTimeout = DefaultWriteTimeout
	}
	ws.SetReadLimit(opt.ReadLimit)
	c := &Client{ws: ws, opt: opt, pending: map[int64]chan clientResponse{}, done: make(chan struct{}), stop: make(chan struct{}),
		qwake: make(chan struct{}, 1), notes: make(chan Notification)}
	go c.readLoop()
	if opt.OnNotification == nil {
		go c.pump()
	} else {
		close(c.notes)
	}
	return c, nil
}

// Call sends method with params (any JSON-marshallable value; nil sends
// {}) and decodes the result into result (which may be nil). A JSON-RPC
// error response comes back as *Error, so errors.Is(err, ErrNotFound) and
// friends work. A connection that ends before the response gives a
// *ClosedError (errors.Is(err, ErrClosed)); ctx ending gives ctx's error and
// leaves the connection open.
func (c *Client) Call(ctx context.Context, method string, params any, result any) error {
	raw, err := c.CallRaw(ctx, method, params)
	if err != nil {
		return err
	}
	if result == nil {
		return nil
	}
	if c.opt.VisibleStrings {
		raw = protocol.VisibleJSON(raw)
	}
	if err := json.Unmarshal(raw, result); err != nil {
		return fmt.Errorf("%s: decoding result: %w", method, err)
	}
	return nil
}

// CallRaw is Call returning the raw result.
func (c *Client) CallRaw(ctx context.Context, method string, params any) (json.RawMessage, error) {
	if params == nil {
		params = struct{}{}
	}
	id := c.nextID.Add(1)
	frame, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		ID      int64  `json:"id"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{Version, id, method, params})
	if err != nil {
		return nil, fmt.Errorf("%s: encoding params: %w", method, err)
	}
	ch := make(chan clientResponse, 1)
	c.mu.Lock()
	if c.closed != nil {
		err := c.closed
		c.mu.Unlock()
		return nil, err
	}
	c.pending[id] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}
	if err := c.write(frame); err != nil {
		forget()
		return nil, err
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return nil, c.Err()
		}
		if r.err != nil {
			return nil, r.err
		}
		return r.result, nil
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	}
}

// Notify sends a client-to-server notification (a request without id).
func (c *Client) Notify(method string, params any) error {
	if params == nil {
		params = struct{}{}
	}
	frame, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{Version, method, params})
	if err != nil {
		return err
	}
	return c.write(frame)
}

func (c *Client) write(frame []byte) error {
	// Not the caller's ctx: cancelling a write midway closes the WebSocket.
	ctx, cancel := context.WithTimeout(context.Background(), c.opt.WriteTimeout)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, frame); err != nil {
		if cerr := c.Err(); cerr != nil {
			return cerr
		}
		return &ClosedError{Status: -1, Err: err}
	}
	return nil
}

// Notifications returns the channel of queued notifications (only when
// DialOptions.OnNotification is nil; otherwise it is closed at once). It is
// closed after the connection ended and every queued notification was
// received.
func (c *Client) Notifications() <-chan Notification { return c.notes }

// Done is closed when the connection has ended.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is nil while the connection is open, then the *ClosedError saying
// how it ended.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed == nil {
		return nil
	}
	return c.closed
}

// CloseStatus is the WebSocket close status of an ended connection (-1 when
// it broke without a close frame, or is still open).
func (c *Client) CloseStatus() websocket.StatusCode {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed == nil {
		return -1
	}
	return c.closed.Status
}

// Close ends the connection with a normal close handshake and waits for the
// reader to finish. Pending calls fail with a *ClosedError, and queued
// notifications not yet received are dropped.
func (c *Client) Close() error {
	c.stopOnce.Do(func() { close(c.stop) })
	c.closeWith(websocket.StatusNormalClosure, "")
	<-c.done
	return nil
}

func (c *Client) closeWith(status websocket.StatusCode, reason string) {
	c.closeOnce.Do(func() {
		c.closeMu.Lock()
		c.ownClose = &ClosedError{Status: status, Reason: reason}
		c.closeMu.Unlock()
		go c.ws.Close(status, reason)
	})
}

func (c *Client) readLoop() {
	var end *ClosedError
	for {
		typ, data, err := c.ws.Read(context.Background())
		if err != nil {
			c.closeMu.Lock()
			own := c.ownClose
			c.closeMu.Unlock()
			switch {
			case own != nil:
				end = own
			case websocket.CloseStatus(err) != -1:
				var ce websocket.CloseError
				errors.As(err, &ce)
				end = &ClosedError{Status: ce.Code, Reason: ce.Reason, Err: err}
			default:
				end = &ClosedError{Status: -1, Err: err}
				if errors.Is(err, websocket.ErrMessageTooBig) {
					end.Status = websocket.StatusMessageTooBig
				}
			}
			c.ws.CloseNow()
			break
		}
		if typ != websocket.MessageText {
			continue
		}
		c.dispatch(data)
	}
	c.mu.Lock()
	c.closed = end
	pending := c.pending
	c.pending = map[int64]chan clientResponse{}
	c.mu.Unlock()
	for _, ch := range pending {
		close(ch)
	}
	c.qmu.Lock()
	c.qclose = true
	c.qmu.Unlock()
	c.wake()
	close(c.done)
}

// wireMessage is any incoming frame.
type wireMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func (c *Client) dispatch(data []byte) {
	var m wireMessage
	// Member names are case-sensitive (JSON-RPC 2.0), as on the daemon's
	// side: a frame saying "ID" or "Result" is not a reply to anything.
	if checkMemberCase(data, &m) != nil || json.Unmarshal(data, &m) != nil {
		return // not JSON-RPC; nothing to match it to
	}
	if m.Method != "" && len(m.ID) == 0 {
		n := Notification{Method: m.Method, Params: m.Params}
		if c.opt.VisibleStrings {
			n.Params = protocol.VisibleJSON(n.Params)
		}
		if c.opt.OnNotification != nil {
			c.opt.OnNotification(n)
			return
		}
		c.enqueue(n)
		return
	}
	id, err := strconv.ParseInt(string(m.ID), 10, 64)
	if err != nil {
		return // id null (a reply to a malformed frame) or not ours
	}
	c.mu.Lock()
	ch := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if ch == nil {
		return // the caller gave up
	}
	if m.Error != nil {
		e := &protocol.Error{Code: m.Error.Code, Message: m.Error.Message}
		var d map[string]any
		if json.Unmarshal(m.Error.Data, &d) == nil && d != nil {
			if r, ok := d["reason"].(string); ok {
				e.Reason = protocol.Reason(r)
			}
			delete(d, "reason")
			if len(d) > 0 {
				e.Data = d
			}
		}
		if e.Reason == "" {
			e.Reason = reasonForCode(e.Code)
		}
		ch <- clientResponse{err: e}
		return
	}
	res := m.Result
	if len(res) == 0 {
		res = json.RawMessage("null")
	}
	ch <- clientResponse{result: res}
}

func reasonForCode(code int) protocol.Reason {
	switch code {
	case protocol.CodeParseError:
		return protocol.ReasonParseError
	case protocol.CodeInvalidRequest:
		return protocol.ReasonInvalidRequest
	case protocol.CodeMethodNotFound:
		return protocol.ReasonMethodNotFound
	case protocol.CodeInvalidParams:
		return protocol.ReasonInvalidParams
	}
	return protocol.ReasonInternal
}

func (c *Client) enqueue(n Notification) {
	c.qmu.Lock()
	if len(c.queue) >= c.opt.NotificationQueue {
		c.qmu.Unlock()
		c.closeWith(websocket.StatusPolicyViolation, "client could not keep up with notifications; resume from the last seq")
		return
	}
	c.queue = append(c.queue, n)
	c.qmu.Unlock()
	c.wake()
}

func (c *Client) wake() {
	select {
	case c.qwake <- struct{}{}:
	default:
	}
}

// pump hands queued notifications to the Notifications channel in order.
func (c *Client) pump() {
	defer close(c.notes)
	for {
		c.qmu.Lock()
		if len(c.queue) == 0 {
			closed := c.qclose
			c.qmu.Unlock()
			if closed {
				return
			}
			select {
			case <-c.qwake:
			case <-c.stop:
				return
			}
			continue
		}
		n := c.queue[0]
		c.queue[0] = Notification{}
		c.queue = c.queue[1:]
		c.qmu.Unlock()
		select {
		case c.notes <- n:
		case <-c.stop:
			return
		}
	}
}
