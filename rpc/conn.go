package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/sessiond/sessiond/protocol"
)

// Version is the only JSON-RPC version spoken.
const Version = "2.0"

// Handler serves one method. params is the raw params value (an object, or
// nil when absent). The result is marshalled as the response's result; an
// error becomes the response's error through AsError. ctx ends when the
// connection closes or the daemon stops.
type Handler func(ctx context.Context, c *Conn, params json.RawMessage) (any, error)

// Mux maps method names to handlers. Register everything before serving.
// Bind registers the typed handler of a row of protocol.Methods; Handle
// registers a raw one (tests, refusals); CheckTable says whether the bound
// methods are exactly the rows a server must serve.
type Mux struct {
	handlers map[string]Handler
	bound    map[string]bool // registered by Bind
}

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{handlers: map[string]Handler{}, bound: map[string]bool{}} }

// Typed adapts a handler of typed params P (a protocol params struct): the
// params are decoded with Decode, which also runs P's Validate, before h
// runs; a decoding or validation error is the response.
func Typed[P, R any](h func(ctx context.Context, c *Conn, p P) (R, error)) Handler {
	return func(ctx context.Context, c *Conn, params json.RawMessage) (any, error) {
		var p P
		if err := Decode(params, &p); err != nil {
			return nil, err
		}
		r, err := h(ctx, c, p)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
}

// Bind registers h as the handler of the method called name, a row of
// protocol.Methods: P must be the row's params type and R its result type.
// Params are decoded and validated as Typed does. It panics (a programming
// error, at start-up) when name is not in the table, the types differ
// from the row's, or the method is already registered.
func Bind[P, R any](m *Mux, name string, h func(ctx context.Context, c *Conn, p P) (R, error)) {
	spec, ok := protocol.Method(name)
	if !ok {
		panic("rpc: Bind " + name + ": not a method of protocol.Methods")
	}
	if pt, want := reflect.TypeFor[P](), reflect.TypeOf(spec.Params); pt != want {
		panic(fmt.Sprintf("rpc: Bind %s: params %v, but protocol.Methods says %v", name, pt, want))
	}
	if rt, want := reflect.TypeFor[R](), reflect.TypeOf(spec.Result); rt != want {
		panic(fmt.Sprintf("rpc: Bind %s: result %v, but protocol.Methods says %v", name, rt, want))
	}
	m.Handle(name, Typed(h))
	m.bound[name] = true
}

// CheckTable returns an error naming every row of want that has no handler
// registered by Bind, and every registered method that is not a row of
// want; nil when they are the same set. A server checks its mux against
// the rows it must serve before it serves.
func (m *Mux) CheckTable(want []protocol.MethodSpec) error {
	var missing, extra []string
	rows := map[string]bool{}
	for _, s := range want {
		rows[s.Name] = true
		if !m.bound[s.Name] {
			missing = append(missing, s.Name)
		}
	}
	for name := range m.handlers {
		if !rows[name] {
			extra = append(extra, name)
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return nil
	}
	slices.Sort(missing)
	slices.Sort(extra)
	return fmt.Errorf("rpc: the handlers do not match the method table: no handler bound for %v; not in the table: %v", missing, extra)
}

// Wrap replaces every registered handler h of method name with
// wrap(name, h), e.g. to give all of them one error path or a guard.
func (m *Mux) Wrap(wrap func(name string, h Handler) Handler) {
	for k, h := range m.handlers {
		m.handlers[k] = wrap(k, h)
	}
}

// Handle registers h for method; a second registration panics.
func (m *Mux) Handle(method string, h Handler) {
	if _, dup := m.handlers[method]; dup {
		panic("rpc: duplicate handler for " + method)
	}
	m.handlers[method] = h
}

// Handler returns the handler registered for method and whether there is
// one; the dispatcher routes requests with the same lookup.
func (m *Mux) Handler(method string) (Handler, bool) {
	h, ok := m.handlers[method]
	return h, ok
}

// Methods lists the registered method names, sorted.
func (m *Mux) Methods() []string {
	out := make([]string, 0, len(m.handlers))
	for k := range m.handlers {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Options bound one connection.
type Options struct {
	// MaxMessageBytes is the largest frame read; a bigger one closes the
	// connection with 1009. Default 4 MiB.
	MaxMessageBytes int64
	// SendQueue bounds queued outgoing notifications; when it is full the
	// client is too slow and is closed with 1008. Default 1024.
	SendQueue int
	// MaxInFlight bounds concurrently running requests; more are refused
	// with reason overloaded. Default 64.
	MaxInFlight int
	// WriteTimeout bounds one frame write; a client that does not take a
	// frame in time is closed with 1008. Default 10s.
	WriteTimeout time.Duration
	// MaxQueuedBytes bounds the bytes of all frames queued and not yet
	// written (responses and notifications); a client that lets more pile
	// up is closed with 1008. Default 64 MiB.
	MaxQueuedBytes int64
	// Logger receives connection-level diagnostics. Default slog.Default().
	Logger *slog.Logger
}

func (o *Options) defaults() {
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = 4 << 20
	}
	if o.SendQueue <= 0 {
		o.SendQueue = 1024
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 64
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.MaxQueuedBytes <= 0 {
		o.MaxQueuedBytes = 64 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Conn is one client's WebSocket connection on the server side.
type Conn struct {
	ws     *websocket.Conn
	mux    *Mux
	opt    Options
	ctx    context.Context
	cancel context.CancelCauseFunc

	out        sendQueue     // bounded by its producers: SendQueue notifications + MaxInFlight responses
	writerDone chan struct{} // closed once the close handshake was sent (finish)
	notifies   atomic.Int64
	inflight   chan struct{}
	handlers   sync.WaitGroup

	closeOnce   sync.Once
	closeStatus websocket.StatusCode
	closeReason string
	mu          sync.Mutex
	onClose     []func()
	values      sync.Map
}

// errSlow is the cancel cause when the client could not keep up.
var errSlow = errors.New("client too slow: send queue full")

// NewConn wraps an accepted WebSocket. Call Serve to run it. ctx is the
// daemon's context (not the HTTP request's): cancelling it ends the
// connection.
func NewConn(ctx context.Context, ws *websocket.Conn, mux *Mux, opt Options) *Conn {
	c := newConn(ctx, mux, opt)
	c.ws = ws
	ws.SetReadLimit(c.opt.MaxMessageBytes)
	c.out.start = func() { go c.writeFrames() }
	context.AfterFunc(c.ctx, c.finish)
	return c
}

// newConn builds a Conn without its WebSocket: everything but Serve and
// the writer works, so tests and fuzz targets can feed frames to
// handleFrame and read the queued replies with c.out.pop.
func newConn(ctx context.Context, mux *Mux, opt Options) *Conn {
	opt.defaults()
	c := &Conn{mux: mux, opt: opt, writerDone: make(chan struct{}),
		inflight: make(chan struct{}, opt.MaxInFlight)}
	c.out.maxFrames, c.out.maxBytes = opt.SendQueue+opt.MaxInFlight, opt.MaxQueuedBytes
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	return c
}

// Context ends when the connection is closed.
func (c *Conn) Context() context.Context { return c.ctx }

// Value and SetValue keep per-connection state for handlers (protocol
// version, subscriptions).
func (c *Conn) Value(key any) (any, bool) { return c.values.Load(key) }

// SetValue stores per-connection state; see Value.
func (c *Conn) SetValue(key, v any) { c.values.Store(key, v) }

// OnClose registers f to run once when the connection ends. If it already
// ended, f runs now.
func (c *Conn) OnClose(f func()) {
	c.mu.Lock()
	if c.onClose == nil && c.ctx.Err() != nil {
		c.mu.Unlock()
		f()
		return
	}
	c.onClose = append(c.onClose, f)
	c.mu.Unlock()
}

// Serve reads frames until the connection ends, dispatching each request in
// its own goroutine, and writes responses and notifications from one writer
// goroutine. It returns after every handler of this connection returned.
func (c *Conn) Serve() {
	c.readLoop()
	c.handlers.Wait()
	c.shutdown(websocket.StatusNormalClosure, "")
	<-c.writerDone
	c.mu.Lock()
	hooks := c.onClose
	c.onClose = nil
	c.mu.Unlock()
	for _, f := range hooks {
		f()
	}
}

// Close ends the connection with status and reason (e.g. 1001 "daemon
// stopping"). Safe to call from any goroutine, more than once.
func (c *Conn) Close(status websocket.StatusCode, reason string) {
	c.shutdown(status, reason)
}

func (c *Conn) shutdown(status websocket.StatusCode, reason string) {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closeStatus, c.closeReason = status, reason
		c.mu.Unlock()
		c.cancel(fmt.Errorf("closed: %d %s", status, reason))
	})
}

// slow closes a client that cannot keep up, without flushing.
func (c *Conn) slow() {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closeStatus, c.closeReason = websocket.StatusPolicyViolation, "client too slow; reconnect and resume from your last seq"
		c.mu.Unlock()
		c.opt.Logger.Warn("closing slow client", "send_queue", c.opt.SendQueue)
		c.cancel(errSlow)
	})
}

func (c *Conn) readLoop() {
	for {
		// Reads are not bound to c.ctx: cancelling a read context tears
		// the TCP connection down without a close frame. The writer ends
		// the connection with a proper close handshake instead.
		typ, data, err := c.ws.Read(context.Background())
		if err != nil {
			c.opt.Logger.Debug("rpc read ended", "err", err)
			if errors.Is(err, websocket.ErrMessageTooBig) {
				c.shutdown(websocket.StatusMessageTooBig, "message too big")
			} else {
				c.shutdown(websocket.StatusNormalClosure, "")
			}
			return
		}
		c.handleFrame(typ, data)
	}
}

// handleFrame decodes one received frame and routes it: a malformed frame
// is answered with an error (id null when the id cannot be known), a
// request runs its handler in its own goroutine (tracked by c.handlers) and
// is answered once, a notification runs without an answer. Replies are
// queued on c.out; handleFrame never blocks on the handler.
func (c *Conn) handleFrame(typ websocket.MessageType, data []byte) {
	if typ != websocket.MessageText {
		c.replyError(nil, protocol.Errorf(protocol.ReasonInvalidRequest, "binary frames are not supported; send one JSON-RPC message per text frame"))
		return
	}
	if !utf8.Valid(data) {
		// RFC 6455 requires text frames to be UTF-8; decoding would
		// silently turn invalid bytes into U+FFFD and merge inputs.
		c.replyError(nil, protocol.Errorf(protocol.ReasonParseError, "parse error: the frame is not valid UTF-8"))
		return
	}
	c.dispatch(data)
}

// jsonSpace is the whitespace RFC 8259 allows around a JSON value; other
// Unicode spaces (U+00A0, U+0085, …) make a frame invalid JSON.
const jsonSpace = " \t\r\n"

func (c *Conn) dispatch(data []byte) {
	if !json.Valid(data) {
		c.replyError(nil, protocol.Errorf(protocol.ReasonParseError, "parse error: the frame is not valid JSON"))
		return
	}
	trimmed := bytes.Trim(data, jsonSpace)
	if trimmed[0] == '[' {
		c.replyError(nil, protocol.Errorf(protocol.ReasonInvalidRequest, "batch requests are not supported; send one message per frame"))
		return
	}
	// Member names are matched exactly (encoding/json would match struct
	// fields case-insensitively and take "ID" for "id"), and presence is
	// tracked so that "id": null and a missing id differ.
	var members map[string]json.RawMessage
	if trimmed[0] != '{' || json.Unmarshal(trimmed, &members) != nil {
		c.replyError(nil, protocol.Errorf(protocol.ReasonInvalidRequest, "invalid request: a JSON-RPC request must be an object"))
		return
	}
	req := struct{ JSONRPC, ID, Method, Params json.RawMessage }{
		members["jsonrpc"], members["id"], members["method"], members["params"]}
	id := req.ID
	if len(id) > 0 {
		switch id[0] {
		case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		default:
			if string(id) != "null" {
				c.replyError(nil, protocol.Errorf(protocol.ReasonInvalidRequest, "invalid request: id must be a string, a number or null"))
				return
			}
		}
	}
	var version, method string
	if json.Unmarshal(req.JSONRPC, &version) != nil || version != Version {
		c.replyError(id, protocol.Errorf(protocol.ReasonInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`))
		return
	}
	if json.Unmarshal(req.Method, &method) != nil || method == "" {
		c.replyError(id, protocol.Errorf(protocol.ReasonInvalidRequest, `invalid request: "method" must be a non-empty string`))
		return
	}
	isNotification := len(id) == 0
	h, ok := c.mux.Handler(method)
	if !ok {
		if !isNotification {
			c.replyError(id, protocol.Errorf(protocol.ReasonMethodNotFound, "method not found: %s", method))
		}
		return
	}
	params := bytes.TrimSpace(req.Params)
	if len(params) > 0 && string(params) != "null" && params[0] != '{' {
		if !isNotification {
			c.replyError(id, protocol.Errorf(protocol.ReasonInvalidParams, "invalid params: params must be an object"))
		}
		return
	}
	if string(params) == "null" {
		params = nil
	}
	select {
	case c.inflight <- struct{}{}:
	default:
		if !isNotification {
			c.replyError(id, protocol.Errorf(protocol.ReasonOverloaded, "too many requests in flight on this connection (limit %d); retry with backoff", c.opt.MaxInFlight).With("limit", c.opt.MaxInFlight))
		}
		return
	}
	c.handlers.Add(1)
	go func() {
		defer c.handlers.Done()
		defer func() { <-c.inflight }()
		var then func()
		result, err := c.call(h, method, params, &then)
		if err != nil {
			if !isNotification {
				c.replyError(id, protocol.AsError(err))
			}
			return
		}
		if !isNotification {
			c.reply(id, result)
		}
		if then != nil {
			then()
		}
	}()
}

func (c *Conn) call(h Handler, method string, params json.RawMessage, then *func()) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.opt.Logger.Error("rpc handler panicked", "method", method, "panic", fmt.Sprint(p))
			err = protocol.Errorf(protocol.ReasonInternal, "internal error in %s", method)
		}
	}()
	return h(context.WithValue(c.ctx, repliedKey{}, then), c, params)
}

type wireResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *wireError      `json:"error,omitempty"`
}

type wireError struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}

// OnReplied makes then run right after the response frame of the request
// served under ctx is queued on the connection (before any frame queued
// later), e.g. session.resume releases the events it buffered after the
// snapshot. It runs only when the handler returns a result (for a
// notification: once the handler returned without error), and at most
// once per request: a second call replaces the first. Outside a request
// (a handler called directly, in tests) then runs at once.
func OnReplied(ctx context.Context, then func()) {
	if slot, ok := ctx.Value(repliedKey{}).(*func()); ok {
		*slot = then
		return
	}
	then()
}

type repliedKey struct{}

func (c *Conn) reply(id json.RawMessage, result any) {
	if result == nil {
		result = struct{}{}
	}
	b, err := json.Marshal(wireResponse{JSONRPC: Version, ID: id, Result: result})
	if err != nil {
		c.replyError(id, protocol.Errorf(protocol.ReasonInternal, "cannot encode result: %v", err))
		return
	}
	c.enqueueResponse(b)
}

func (c *Conn) replyError(id json.RawMessage, e *protocol.Error) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	data := make(map[string]any, len(e.Data)+1)
	for k, v := range e.Data {
		data[k] = v
	}
	data["reason"] = string(e.Reason)
	msg := e.Message
	if msg == "" {
		msg = string(e.Reason)
	}
	b, err := json.Marshal(wireResponse{JSONRPC: Version, ID: id, Error: &wireError{Code: e.Code, Message: msg, Data: data}})
	if err != nil {
		b, _ = json.Marshal(wireResponse{JSONRPC: Version, ID: id, Error: &wireError{Code: protocol.CodeInternal, Message: "cannot encode error", Data: map[string]any{"reason": protocol.ReasonInternal}}})
	}
	c.enqueueResponse(b)
}

// enqueueResponse queues a response. A client that lets responses and
// notifications pile up past the queue's bounds (SendQueue+MaxInFlight
// frames, MaxQueuedBytes) is not reading: it is closed with 1008.
func (c *Conn) enqueueResponse(b []byte) {
	if c.ctx.Err() == nil && !c.out.push(b) {
		c.slow()
	}
}

// sendQueue is a connection's outgoing frames, in order, and the state of
// its writer. There is no writer goroutine while the queue is empty: push
// starts one, which writes until the queue is drained and then ends, so
// an idle connection holds neither a buffer nor a writer's stack (a
// preallocated channel and a parked writer cost about 30 KB per
// connection; docs/performance.md). It holds at most maxFrames frames and
// maxBytes bytes (0: unbounded); NotifyRaw also bounds notifications alone
// by SendQueue.
type sendQueue struct {
	mu        sync.Mutex
	frames    [][]byte
	bytes     int64
	maxFrames int
	maxBytes  int64
	writing   bool           // a writer goroutine is draining frames
	closed    bool           // the connection is closing: finish writes what is left
	writers   sync.WaitGroup // running writer goroutines (at most one)
	start     func()         // starts a writer goroutine; nil leaves frames for pop (tests)
}

// push appends b and starts a writer unless one runs or the connection is
// closing. It returns false, queueing nothing, when b would exceed a bound.
func (q *sendQueue) push(b []byte) bool {
	q.mu.Lock()
	if (q.maxFrames > 0 && len(q.frames) >= q.maxFrames) || (q.maxBytes > 0 && q.bytes+int64(len(b)) > q.maxBytes) {
		q.mu.Unlock()
		return false
	}
	q.frames = append(q.frames, b)
	q.bytes += int64(len(b))
	spawn := !q.writing && !q.closed && q.start != nil
	if spawn {
		q.writing = true
		q.writers.Add(1)
	}
	q.mu.Unlock()
	if spawn {
		q.start()
	}
	return true
}

// pop returns the oldest frame, or false when the queue is empty; it
// lets go of the buffer when it empties.
func (q *sendQueue) pop() ([]byte, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.popLocked()
}

func (q *sendQueue) popLocked() ([]byte, bool) {
	if len(q.frames) == 0 {
		return nil, false
	}
	b := q.frames[0]
	q.frames[0] = nil
	q.frames = q.frames[1:]
	q.bytes -= int64(len(b))
	if len(q.frames) == 0 {
		q.frames = nil
	}
	return b, true
}

// next is pop for the writer: on an empty queue (or when stop is set) it
// ends the writer's turn, so the next push starts a new one.
func (q *sendQueue) next(stop bool) ([]byte, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !stop {
		if b, ok := q.popLocked(); ok {
			return b, true
		}
	}
	q.writing = false
	return nil, false
}

// close stops starting writers and waits for the running one to end.
func (q *sendQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.writers.Wait()
}

// Notify queues a notification without blocking. When the client has
// SendQueue notifications unread, it is too slow: the connection is closed
// with 1008 and Notify returns false; the client reconnects and resumes from
// its last event seq.
func (c *Conn) Notify(method string, params any) bool {
	b, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{Version, method, params})
	if err != nil {
		c.opt.Logger.Error("rpc: cannot encode notification", "method", method, "err", err)
		return false
	}
	return c.NotifyRaw(b)
}

// NotifyRaw queues an already encoded notification frame; see Notify.
func (c *Conn) NotifyRaw(frame []byte) bool {
	if c.ctx.Err() != nil {
		return false
	}
	if c.notifies.Add(1) > int64(c.opt.SendQueue) {
		c.notifies.Add(-1)
		c.slow()
		return false
	}
	if !c.out.push(tagNotify(frame)) {
		c.notifies.Add(-1)
		c.slow()
		return false
	}
	return true
}

// QueuedNotifications is how many notifications are queued for the client
// and not yet written; NotifyRaw closes the connection (1008) when it would
// exceed SendQueueLimit. Senders of droppable notifications (streamed tool
// output) use it to hold back before that.
func (c *Conn) QueuedNotifications() int { return int(c.notifies.Load()) }

// SendQueueLimit is Options.SendQueue: the most notifications queued unread.
func (c *Conn) SendQueueLimit() int { return c.opt.SendQueue }

// Notification frames are marked by a leading NUL byte so the writer can
// count them out of the bound; it is stripped before writing.
func tagNotify(b []byte) []byte { return append([]byte{0}, b...) }

// writeFrames is the writer goroutine: it writes queued frames until the
// queue is empty or the connection ends (finish writes the rest).
func (c *Conn) writeFrames() {
	defer c.out.writers.Done()
	for {
		b, ok := c.out.next(c.ctx.Err() != nil)
		if !ok {
			return
		}
		if len(b) > 0 && b[0] == 0 {
			b = b[1:]
			c.notifies.Add(-1)
		}
		// Not derived from c.ctx: a write whose context ends makes the
		// websocket library drop the TCP connection, which would lose the
		// close frame sent after c.ctx is cancelled.
		ctx, cancel := context.WithTimeout(context.Background(), c.opt.WriteTimeout)
		err := c.ws.Write(ctx, websocket.MessageText, b)
		cancel()
		if err != nil {
			c.out.next(true)
			if c.ctx.Err() == nil {
				c.slow()
			}
			return
		}
	}
}

// finish runs once the connection's context ended (shutdown, slow, or the
// daemon's context): it waits for the writer, writes what is still queued
// (responses and notifications of work that happened; not for a slow
// client), bounded by one second, then sends the close frame with the
// status set by shutdown or slow.
func (c *Conn) finish() {
	defer close(c.writerDone)
	c.out.close()
	if context.Cause(c.ctx) != errSlow {
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			b, ok := c.out.pop()
			if !ok {
				break
			}
			if len(b) > 0 && b[0] == 0 {
				b = b[1:]
			}
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			err := c.ws.Write(ctx, websocket.MessageText, b)
			cancel()
			if err != nil {
				break
			}
		}
	}
	c.mu.Lock()
	status, reason := c.closeStatus, c.closeReason
	c.mu.Unlock()
	if status == 0 {
		status = websocket.StatusInternalError
	}
	err := c.ws.Close(status, reason)
	c.opt.Logger.Debug("websocket close handshake", "status", int(status), "err", err)
}
