package model

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"time"
)

// errTooLong is what the line scanner reports for an oversized line.
var errTooLong = bufio.ErrTooLong

// watchedBody wraps a streaming response body. It enforces the idle timeout
// (the timer runs only while a Read is waiting for the server, so a slow
// onDelta never counts as server silence) and keeps the first MaxErrorBody
// bytes so that a non-SSE reply can be quoted in the error.
type watchedBody struct {
	rc    io.ReadCloser
	idle  time.Duration
	timer *time.Timer
	head  []byte // first MaxErrorBody bytes of the body
	n     int64  // total bytes read
}

func newWatchedBody(rc io.ReadCloser, idle time.Duration, onIdle func()) *watchedBody {
	t := time.AfterFunc(idle, onIdle)
	t.Stop()
	return &watchedBody{rc: rc, idle: idle, timer: t}
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.timer.Reset(b.idle)
	n, err := b.rc.Read(p)
	b.timer.Stop()
	if n > 0 {
		b.n += int64(n)
		if room := MaxErrorBody - len(b.head); room > 0 {
			b.head = append(b.head, p[:min(n, room)]...)
		}
	}
	return n, err
}

func (b *watchedBody) Close() error {
	b.timer.Stop()
	return b.rc.Close()
}

// maxLine bounds one line of the event stream (32 MiB, as openai-go's own
// decoder does); a longer line is a bad_response.
const maxLine = 32 << 20

// sseEvent is one server-sent event: its "event:" type, its "data:" lines
// joined with "\n", and the value of a non-standard "error:" field (older
// llama.cpp servers report a failure that way, at HTTP 200).
type sseEvent struct {
	Type     string
	Data     []byte
	ErrField []byte
}

// eventDecoder reads text/event-stream framing: it dispatches an event at
// each blank line, skips comments (": keep-alive", ": OPENROUTER
// PROCESSING") and unknown fields, and counts events and keeps the last
// one's data for error messages. At the end of the body, a pending event
// without its blank line (some servers omit the last one) is dispatched
// when it is [DONE] or reports an error; any other is dropped, as the SSE
// standard says, so a cut-off chunk is never read as complete.
type eventDecoder struct {
	scn    *bufio.Scanner
	ev     sseEvent
	err    error
	events int
	last   []byte
}

func newEventDecoder(r io.Reader) *eventDecoder {
	scn := bufio.NewScanner(r)
	scn.Buffer(nil, maxLine)
	return &eventDecoder{scn: scn}
}

// Next reads the next event; false at the end of the body or on a read
// error (see Err).
func (d *eventDecoder) Next() bool {
	var typ string
	var data, errField []byte
	hasData := false
	dispatch := func() bool {
		d.ev = sseEvent{Type: typ, Data: data, ErrField: errField}
		d.events++
		d.last = data
		if len(errField) > 0 && len(data) == 0 {
			d.last = errField
		}
		return true
	}
	for d.scn.Scan() {
		line := d.scn.Bytes()
		if len(line) == 0 {
			if len(bytes.TrimSpace(data)) > 0 || len(errField) > 0 || typ == "error" {
				return dispatch()
			}
			typ = ""
			continue
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(name) {
		case "": // comment
		case "event":
			typ = string(value)
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, value...)
			hasData = true
		case "error":
			errField = append(errField, value...)
		}
	}
	d.err = d.scn.Err()
	if d.err == nil && (len(errField) > 0 || bytes.HasPrefix(data, doneSentinel) || isErrorChunk(data)) {
		return dispatch()
	}
	return false
}

// Event returns the event read by the last successful Next.
func (d *eventDecoder) Event() sseEvent { return d.ev }

// Err returns the read error that ended the stream, if any (nil at a clean
// end of the body).
func (d *eventDecoder) Err() error { return d.err }

var doneSentinel = []byte("[DONE]")

// looksLikeSSE reports whether head (the start of a body that produced no
// events) is made only of SSE lines: blank lines, comments and known fields.
// cut says head was truncated, so its last line may be incomplete and is
// ignored.
func looksLikeSSE(head []byte, cut bool) bool {
	lines := bytes.Split(head, []byte("\n"))
	if cut && len(lines) > 0 {
		lines = lines[:len(lines)-1]
	}
	for _, l := range lines {
		l = bytes.TrimSuffix(l, []byte("\r"))
		if len(l) == 0 || l[0] == ':' {
			continue
		}
		name, _, _ := bytes.Cut(l, []byte(":"))
		switch string(name) {
		case "data", "event", "id", "retry":
		default:
			return false
		}
	}
	return true
}

// isErrorChunk reports whether data is a JSON object with a non-empty
// "error" field.
func isErrorChunk(data []byte) bool {
	var v struct {
		Error json.RawMessage `json:"error"`
	}
	return json.Unmarshal(data, &v) == nil && isError(v.Error)
}
