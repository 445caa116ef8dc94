package model

import (
	"bufio"
	"bytes"
	"io"
	"time"

	"github.com/openai/openai-go/v3/packages/ssestream"
)

// errTooLong is what ssestream's line scanner reports for an oversized line.
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

// tapDecoder observes the events ssestream decodes: it counts them, keeps
// the last event's data (quoted when it fails to parse) and notes the [DONE]
// sentinel, which ssestream.Stream consumes silently.
type tapDecoder struct {
	ssestream.Decoder
	events  int
	sawDone bool
	last    []byte
}

var doneSentinel = []byte("[DONE]")

func (d *tapDecoder) Next() bool {
	if !d.Decoder.Next() {
		return false
	}
	ev := d.Decoder.Event()
	d.events++
	d.last = ev.Data
	// Same test ssestream.Stream applies before it stops.
	if bytes.HasPrefix(ev.Data, doneSentinel) {
		d.sawDone = true
	}
	return true
}

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
