package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// This file is the bridge's own JSON-RPC framing around the SDK's
// connection (acp-go-sdk v0.13.0): the SDK logs and skips a line that is
// not JSON where JSON-RPC 2.0 wants a -32700 answer, has no route for
// ACP 1.0's session/delete, gives a prompt's handler no way to tell
// $/cancel_request from its own cancellation of the previous prompt of a
// session, and answers nothing it has in flight when stdin closes. The
// frame filter reads the editor's lines before the SDK does and fixes
// these; the frame tracker sees what goes out.

// deleteMethod is the extension method the filter routes ACP's
// session/delete to (the SDK dispatches "_"-prefixed methods to
// HandleExtensionMethod).
const deleteMethod = "_sessiond/session_delete"

// requestIDMeta is the _meta key the filter adds to a session/prompt
// request's params: the request's JSON-RPC id, so that $/cancel_request
// of that id reaches that prompt.
const requestIDMeta = "sessiond/request_id"

// sdkMaxLine is the acp-go-sdk connection's line limit (its scanner's
// maximum buffer, 10 MiB): a longer line ends its reader and the
// connection.
const sdkMaxLine = 10 << 20

// maxFrame is the longest frame the filter accepts from the editor and
// passes to the SDK, in bytes without the newline (which must fit in the
// SDK's buffer too).
const maxFrame = sdkMaxLine - 1

// frames filters the editor's input and tracks the requests in flight.
type frames struct {
	b   *bridge
	out *lockedWriter

	mu       sync.Mutex
	inflight map[string]bool // canonical ids of the editor's requests not yet answered
	changed  chan struct{}   // closed and replaced when inflight shrinks
}

// lockedWriter serialises the SDK's frames and the filter's own answers on
// stdout, one Write per frame.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
	f  *frames
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.w.Write(b)
	if err == nil && l.f != nil {
		l.f.sent(b)
	}
	return n, err
}

func newFrames(b *bridge, stdout io.Writer) *frames {
	f := &frames{b: b, inflight: map[string]bool{}, changed: make(chan struct{})}
	f.out = &lockedWriter{w: &scopeWriter{w: stdout}, f: f}
	return f
}

// wire is the envelope the filter reads.
type wire struct {
	JSONRPC string           `json:"jsonrpc"`
	ID      *json.RawMessage `json:"id,omitempty"`
	Method  *string          `json:"method,omitempty"`
	Params  json.RawMessage  `json:"params,omitempty"`
	Result  json.RawMessage  `json:"result,omitempty"`
	Error   json.RawMessage  `json:"error,omitempty"`
}

// idKey is a request id as a map key: its compact JSON.
func idKey(raw json.RawMessage) string {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}

// filter copies the editor's frames from in to the returned reader (the
// SDK's input), answering malformed ones itself; the reader ends when in
// does. A frame longer than maxFrame is refused (-32600, with its id when
// the frame's head names one) and skipped: the next frame goes through.
func (f *frames) filter(in io.Reader) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		r := bufio.NewReaderSize(in, 64<<10)
		for {
			line, head, err := readFrame(r)
			if head != nil {
				f.answerError(headID(head), -32600, "Invalid request",
					fmt.Sprintf("a frame longer than %d bytes (the line limit): refused", maxFrame))
			}
			if line = bytes.TrimSpace(line); len(line) > 0 {
				if out, ok := f.frame(line); ok {
					if _, werr := pw.Write(append(out, '\n')); werr != nil {
						return
					}
				}
			}
			if err != nil {
				if err != io.EOF {
					f.answerError(nil, -32700, "Parse error", "unreadable input: "+err.Error())
				}
				pw.Close()
				return
			}
		}
	}()
	return pr
}

// readFrame reads one line of r. A line longer than maxFrame is read to
// its end and dropped: line is nil and head holds its first bytes. err is
// r's (io.EOF at the end, with the last unterminated line).
func readFrame(r *bufio.Reader) (line, head []byte, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if head == nil && len(line)+len(chunk) <= maxFrame+1 {
			line = append(line, chunk...)
		} else if head == nil {
			head, line = append(line, chunk[:min(len(chunk), 4096)]...), nil
		}
		if err != bufio.ErrBufferFull {
			return line, head, err
		}
	}
}

// headID is the id of a frame known by its first bytes only, if they
// name one before anything unreadable: editors write "jsonrpc", "id" and
// "method" before "params".
func headID(head []byte) *json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(head))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		if t == "id" {
			return &v
		}
	}
}

// frame checks one line; ok is false when the filter answered it itself.
func (f *frames) frame(line []byte) (out []byte, ok bool) {
	if !json.Valid(line) {
		f.answerError(nil, -32700, "Parse error", "the frame is not valid JSON (JSON-RPC 2.0 over newline-delimited JSON)")
		return nil, false
	}
	if line[0] != '{' {
		// A batch (or any non-object) is not supported by ACP.
		f.answerError(nil, -32600, "Invalid request", "a frame must be one JSON-RPC 2.0 object (batches are not supported)")
		return nil, false
	}
	var m wire
	if err := json.Unmarshal(line, &m); err != nil {
		f.answerError(nil, -32600, "Invalid request", "not a JSON-RPC 2.0 message: "+err.Error())
		return nil, false
	}
	if m.Method == nil {
		if m.ID != nil && (m.Result != nil || m.Error != nil) {
			return line, true // a response to one of the bridge's requests
		}
		f.answerError(m.ID, -32600, "Invalid request", "a request needs a method (a response needs an id and a result or error)")
		return nil, false
	}
	method := *m.Method
	if m.ID == nil {
		if method == "$/cancel_request" {
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			if json.Unmarshal(m.Params, &p) == nil && len(p.RequestID) > 0 {
				key := idKey(p.RequestID)
				f.mu.Lock()
				inflight := f.inflight[key]
				f.mu.Unlock()
				if inflight { // answered long ago, or never sent: nothing to cancel
					f.b.cancelRequest(key)
				}
			}
		}
		return line, true
	}
	key := idKey(*m.ID)
	f.mu.Lock()
	f.inflight[key] = true
	f.mu.Unlock()
	switch method {
	case "session/delete":
		return rewrite(line, func(o map[string]json.RawMessage) { o["method"], _ = json.Marshal(deleteMethod) }), true
	case "session/prompt":
		out := rewrite(line, func(o map[string]json.RawMessage) {
			var params map[string]json.RawMessage
			if json.Unmarshal(o["params"], &params) != nil || params == nil {
				return // the SDK refuses it as invalid params
			}
			var meta map[string]any
			json.Unmarshal(params["_meta"], &meta)
			if meta == nil {
				meta = map[string]any{}
			}
			meta[requestIDMeta] = key
			params["_meta"], _ = json.Marshal(meta)
			o["params"], _ = json.Marshal(params)
		})
		if len(out) > maxFrame {
			// The request id in _meta (and Marshal's escaping of <, >
			// and &) made it longer than the SDK reads.
			f.answerError(m.ID, -32600, "Invalid request",
				fmt.Sprintf("the prompt frame is %d bytes once the bridge adds its request id; the line limit is %d", len(out), maxFrame))
			return nil, false
		}
		return out, true
	}
	return line, true
}

// rewrite applies edit to the frame's top-level object.
func rewrite(line []byte, edit func(map[string]json.RawMessage)) []byte {
	var o map[string]json.RawMessage
	if json.Unmarshal(line, &o) != nil {
		return line
	}
	edit(o)
	b, err := json.Marshal(o)
	if err != nil {
		return line
	}
	return b
}

// answerError writes an error response (id null when the frame's id could
// not be read).
func (f *frames) answerError(id *json.RawMessage, code int, msg, detail string) {
	rid := json.RawMessage("null")
	if id != nil {
		rid = *id
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": rid,
		"error": map[string]any{"code": code, "message": msg, "data": map[string]any{"error": detail}}})
	f.out.Write(append(b, '\n'))
}

// sent notes an answer going out: the request it answers is no longer in
// flight.
func (f *frames) sent(b []byte) {
	var m wire
	if json.Unmarshal(bytes.TrimSpace(b), &m) != nil || m.ID == nil || m.Method != nil {
		return
	}
	key := idKey(*m.ID)
	f.mu.Lock()
	answered := f.inflight[key]
	if answered {
		delete(f.inflight, key)
		close(f.changed)
		f.changed = make(chan struct{})
	}
	f.mu.Unlock()
	if answered {
		f.b.forgetRequest(key)
	}
}

// drain waits until every request the editor sent has been answered, or
// until ctx ends; it returns how many were left unanswered.
func (f *frames) drain(ctx context.Context) int {
	for {
		f.mu.Lock()
		n, ch := len(f.inflight), f.changed
		f.mu.Unlock()
		if n == 0 {
			return 0
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return n
		}
	}
}

// drainTimeout bounds how long the bridge waits, once stdin closed, for
// its handlers to answer the requests in flight.
const drainTimeout = 30 * time.Second
