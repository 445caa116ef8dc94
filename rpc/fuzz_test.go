package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sessiond/sessiond/protocol"
	"io"
	"log/slog"
	"reflect"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/coder/websocket"
)

// fuzzAfterRuns counts the OnReplied hooks run by the "after" method of
// fuzzMux; every call of it, request or notification, must run its hook
// exactly once.
var fuzzAfterRuns atomic.Int64

// fuzzMux has one method per kind of handler outcome: a result, a refusal,
// a params decode, a plain Go error, a panic and an OnReplied hook.
func fuzzMux() *Mux {
	m := NewMux()
	m.Handle("echo", func(ctx context.Context, c *Conn, p json.RawMessage) (any, error) {
		return struct {
			Params json.RawMessage `json:"params"`
		}{p}, nil
	})
	m.Handle("refuse", func(ctx context.Context, c *Conn, p json.RawMessage) (any, error) {
		return nil, fmt.Errorf("wrapped: %w", protocol.ErrNotFound.With("admission_id", "adm_1"))
	})
	m.Handle("decode", func(ctx context.Context, c *Conn, p json.RawMessage) (any, error) {
		var v struct {
			N int      `json:"n"`
			S string   `json:"s"`
			L []string `json:"l"`
			B *bool    `json:"b"`
		}
		if err := Decode(p, &v); err != nil {
			return nil, err
		}
		return v, nil
	})
	m.Handle("boom", func(ctx context.Context, c *Conn, p json.RawMessage) (any, error) {
		return nil, errors.New("plain go error")
	})
	m.Handle("panic", func(ctx context.Context, c *Conn, p json.RawMessage) (any, error) { panic("boom") })
	m.Handle("after", func(ctx context.Context, c *Conn, p json.RawMessage) (any, error) {
		OnReplied(ctx, func() { fuzzAfterRuns.Add(1) })
		return "after", nil
	})
	return m
}

// expectation is what the JSON-RPC 2.0 spec, PROTOCOL.md section 3 and
// docs/protocol.md part 2 (section A) say one frame must produce. It is
// derived from the frame with a case-sensitive object decode, independent
// of dispatch.
type expectation struct {
	reply  bool            // exactly one reply (else none)
	id     json.RawMessage // the id to echo; nil means null
	code   int             // expected error code; 0 means a result, -1 either a result or -32602
	runs   bool            // the handler is called
	method string          // set for a valid call
	params json.RawMessage // the params of a valid call
}

// isJSONSpace reports the four whitespace bytes of RFC 8259.
func isJSONSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

func expect(data []byte) expectation {
	null := expectation{reply: true}
	if !utf8.Valid(data) || !json.Valid(data) {
		null.code = protocol.CodeParseError
		return null
	}
	trimmed := bytes.TrimFunc(data, func(r rune) bool { return r < utf8.RuneSelf && isJSONSpace(byte(r)) })
	if trimmed[0] != '{' { // batches, scalars and null
		null.code = protocol.CodeInvalidRequest
		return null
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &obj); err != nil {
		panic(fmt.Sprintf("a valid JSON object did not decode: %v", err))
	}
	id, hasID := obj["id"]
	if hasID {
		switch id[0] {
		case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		case 'n': // null
		default:
			null.code = protocol.CodeInvalidRequest
			return null
		}
	}
	e := expectation{reply: true, id: id, code: protocol.CodeInvalidRequest}
	var version, method string
	if json.Unmarshal(obj["jsonrpc"], &version) != nil || version != "2.0" {
		return e
	}
	if json.Unmarshal(obj["method"], &method) != nil || method == "" {
		return e
	}
	e.method, e.params = method, obj["params"]
	known := false
	switch method {
	case "echo", "decode", "refuse", "boom", "panic", "after":
		known = true
	}
	p := e.params
	paramsOK := len(p) == 0 || p[0] == '{' || string(p) == "null"
	if !hasID { // a notification: never a reply
		return expectation{method: method, params: p, runs: known && paramsOK}
	}
	if !known {
		e.code = protocol.CodeMethodNotFound
		return e
	}
	if !paramsOK {
		e.code = protocol.CodeInvalidParams
		return e
	}
	e.runs = true
	switch method {
	case "refuse":
		e.code = protocol.CodeRefused
	case "boom", "panic":
		e.code = protocol.CodeInternal
	case "decode":
		e.code = decodeExpectation(e.params)
	default:
		e.code = 0
	}
	return e
}

// decodeExpectation is the "decode" method's outcome by the JSON types of
// its fields: a number that is not an int, or a value of another JSON
// type (null aside), is invalid params (-32602); -1 when it cannot tell.
func decodeExpectation(params json.RawMessage) int {
	var obj map[string]json.RawMessage
	if len(params) == 0 || string(params) == "null" {
		return 0
	}
	if err := json.Unmarshal(params, &obj); err != nil {
		panic(err)
	}
	// encoding/json matches field names case-insensitively; only check
	// the unambiguous case of one key folding to the field's name.
	for _, f := range []string{"n", "s", "l", "b"} {
		var v json.RawMessage
		n := 0
		for k, raw := range obj {
			if bytes.EqualFold([]byte(k), []byte(f)) {
				v, n = raw, n+1
			}
		}
		if n > 1 {
			return -1 // which key wins is up to encoding/json
		}
		if n == 0 || string(v) == "null" {
			continue
		}
		ok := true
		switch f {
		case "n":
			var x int
			ok = json.Unmarshal(v, &x) == nil && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9'))
		case "s":
			ok = v[0] == '"'
		case "l":
			var x []string
			ok = json.Unmarshal(v, &x) == nil
		case "b":
			ok = string(v) == "true" || string(v) == "false"
		}
		if !ok {
			return protocol.CodeInvalidParams
		}
	}
	return 0
}

// reasonsByCode lists the reasons each code may carry (rpc/errors.go).
var reasonsByCode = map[int][]protocol.Reason{
	protocol.CodeParseError:     {protocol.ReasonParseError},
	protocol.CodeInvalidRequest: {protocol.ReasonInvalidRequest},
	protocol.CodeMethodNotFound: {protocol.ReasonMethodNotFound},
	protocol.CodeInvalidParams:  {protocol.ReasonInvalidParams},
	protocol.CodeInternal:       {protocol.ReasonInternal},
	protocol.CodeRefused: {protocol.ReasonNotFound, protocol.ReasonStaleGeneration, protocol.ReasonUnknownExecution, protocol.ReasonAdmissionConflict,
		protocol.ReasonCancelled, protocol.ReasonNotQueued, protocol.ReasonDraining, protocol.ReasonStorageUnavailable, protocol.ReasonOverloaded, protocol.ReasonSessionBusy},
}

// checkReply validates one reply frame as a JSON-RPC 2.0 response and
// returns its id and error code (0 for a result).
func checkReply(t *testing.T, frame []byte) (id json.RawMessage, code int, result json.RawMessage) {
	t.Helper()
	var r map[string]json.RawMessage
	if err := json.Unmarshal(frame, &r); err != nil {
		t.Fatalf("reply is not a JSON object: %.300s: %v", frame, err)
	}
	if string(r["jsonrpc"]) != `"2.0"` {
		t.Fatalf(`reply without "jsonrpc":"2.0": %.300s`, frame)
	}
	id, ok := r["id"]
	if !ok {
		t.Fatalf("reply without id: %.300s", frame)
	}
	res, hasRes := r["result"]
	rawErr, hasErr := r["error"]
	if hasRes == hasErr {
		t.Fatalf("reply must have exactly one of result and error: %.300s", frame)
	}
	for k := range r {
		switch k {
		case "jsonrpc", "id", "result", "error":
		default:
			t.Fatalf("reply has member %q: %.300s", k, frame)
		}
	}
	if hasRes {
		return id, 0, res
	}
	var e struct {
		Code    *int            `json:"code"`
		Message *string         `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(rawErr, &e); err != nil || e.Code == nil || e.Message == nil || *e.Message == "" {
		t.Fatalf("error object needs an integer code and a message: %.300s", frame)
	}
	var data struct {
		Reason *protocol.Reason `json:"reason"`
	}
	if err := json.Unmarshal(e.Data, &data); err != nil || data.Reason == nil {
		t.Fatalf("error without data.reason: %.300s", frame)
	}
	allowed, ok := reasonsByCode[*e.Code]
	if !ok {
		t.Fatalf("error code %d is neither JSON-RPC's nor the protocol's: %.300s", *e.Code, frame)
	}
	found := false
	for _, a := range allowed {
		found = found || a == *data.Reason
	}
	if !found {
		t.Fatalf("reason %q does not go with code %d: %.300s", *data.Reason, *e.Code, frame)
	}
	return id, *e.Code, nil
}

// sameJSON compares two JSON values by meaning (numbers by their text).
func sameJSON(a, b json.RawMessage) bool {
	decode := func(r json.RawMessage) (any, error) {
		d := json.NewDecoder(bytes.NewReader(r))
		d.UseNumber()
		var v any
		err := d.Decode(&v)
		return v, err
	}
	va, ea := decode(a)
	vb, eb := decode(b)
	return ea == nil && eb == nil && reflect.DeepEqual(va, vb)
}

// FuzzDispatch feeds one arbitrary text frame through the server's real
// frame handling (Conn.handleFrame: UTF-8 check, JSON decode, request
// validation, routing, handler call, reply encoding) and checks against
// the JSON-RPC 2.0 spec and docs/protocol.md: no panic; a request with an
// id gets exactly one valid JSON-RPC 2.0 reply echoing the id, with exactly
// one of result and error and an error code and reason of PROTOCOL.md
// section 3; a frame whose id cannot be known is answered with id null;
// a notification gets no reply; invalid UTF-8 and invalid JSON get -32700;
// a batch gets one -32600.
func FuzzDispatch(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":[1,2,{"b":null}]}}`,
		`{"jsonrpc":"2.0","id":"x","method":"decode","params":{"n":1,"s":"t","l":["a"],"b":true}}`,
		`null`,
		`[]`,
		`{"jsonrpc":"2.0","id":6,"method":"boom"}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"echo\",\"params\":{\"t\":\"\xff\"}}",
	} {
		f.Add([]byte(s))
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	mux := fuzzMux()
	f.Fuzz(func(t *testing.T, data []byte) {
		want := expect(data)
		c := newConn(context.Background(), mux, Options{SendQueue: 1, MaxInFlight: 4, Logger: logger})
		defer c.cancel(nil)
		before := fuzzAfterRuns.Load()
		c.handleFrame(websocket.MessageText, data)
		c.handlers.Wait()
		var replies [][]byte
	drain:
		for {
			b, ok := c.out.pop()
			if !ok {
				break drain
			}
			if len(b) > 0 && b[0] == 0 {
				t.Fatalf("a notification was queued for frame %.300q", data)
			}
			replies = append(replies, b)
		}
		if want.method == "after" {
			wantRuns := int64(0)
			if want.runs {
				wantRuns = 1
			}
			if got := fuzzAfterRuns.Load() - before; got != wantRuns {
				t.Fatalf("frame %.300q: OnReplied hook ran %d times, want %d", data, got, wantRuns)
			}
		}
		if !want.reply {
			if len(replies) != 0 {
				t.Fatalf("notification %.300q was answered: %.300s", data, replies[0])
			}
			return
		}
		if len(replies) != 1 {
			t.Fatalf("frame %.300q: %d replies, want exactly one", data, len(replies))
		}
		id, code, result := checkReply(t, replies[0])
		wantID := want.id
		if wantID == nil {
			wantID = json.RawMessage("null")
		}
		if !sameJSON(id, wantID) {
			t.Fatalf("frame %.300q: reply id %s, want %s", data, id, wantID)
		}
		if code != want.code && !(want.code == -1 && (code == 0 || code == protocol.CodeInvalidParams)) {
			t.Fatalf("frame %.300q: reply %.300s, want code %d", data, replies[0], want.code)
		}
		if code == 0 && want.method == "echo" {
			var r struct {
				Params json.RawMessage `json:"params"`
			}
			if err := json.Unmarshal(result, &r); err != nil {
				t.Fatalf("echo result %.300s: %v", result, err)
			}
			p := want.params
			if p == nil {
				p = json.RawMessage("null")
			}
			if !sameJSON(r.Params, p) {
				t.Fatalf("frame %.300q: echo returned params %.300s, want %.300s", data, r.Params, p)
			}
		}
	})
}
