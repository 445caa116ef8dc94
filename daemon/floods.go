package daemon

import (
	"encoding/json"
	"fmt"

	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
	"github.com/sessiond/sessiond/store"
)

// Tool output floods. A command may print far faster than a client reads.
// Durable events must reach every subscriber (a connection that cannot take
// them is closed, 1008, and resumes from its last seq), but tool.output
// deltas are a live view of output that the tool result keeps anyway
// (capped): when a connection is behind, its tool.output is held back and
// coalesced instead of queued, and what does not fit in the backlog is
// counted and replaced by one marker. The connection stays open.

const (
	// backlogBytes bounds the output held back per connection and tool call.
	backlogBytes = 64 << 10
	// outputChunkBytes bounds one coalesced tool.output frame.
	outputChunkBytes = 16 << 10
)

// outputBacklog is the output held back for one tool call on one
// connection: the first backlogBytes of it, then only a count.
type outputBacklog struct {
	ev      protocol.Event // the last delta's envelope (session, admission, generation)
	callID  string
	text    []byte
	omitted int64
}

// behind reports whether c's send queue is too full for droppable frames:
// half of it stays free for durable events and responses.
func behind(c *rpc.Conn) bool {
	return c.QueuedNotifications() >= max(1, c.SendQueueLimit()/2)
}

// sendOutput delivers one tool.output delta to c (frame is its encoding),
// or holds it back while c is behind. Called with h.mu held.
func (h *hub) sendOutput(c *rpc.Conn, sub *subscription, ev protocol.Event, frame []byte) {
	pl, _ := ev.Decode()
	p, ok := pl.(protocol.ToolOutputPayload)
	if !ok {
		c.NotifyRaw(frame)
		return
	}
	b := sub.backlog[p.ToolCallID]
	if b == nil && !behind(c) {
		c.NotifyRaw(frame)
		return
	}
	if b == nil {
		if sub.backlog == nil {
			sub.backlog = map[string]*outputBacklog{}
		}
		b = &outputBacklog{callID: p.ToolCallID}
		sub.backlog[p.ToolCallID] = b
	}
	b.ev = ev
	if room := backlogBytes - len(b.text); room > 0 {
		take := min(room, len(p.Text))
		b.text = append(b.text, p.Text[:take]...)
		b.omitted += int64(len(p.Text) - take)
	} else {
		b.omitted += int64(len(p.Text))
	}
	if !behind(c) {
		h.drain(c, sub, b)
	}
}

// drain sends b's held-back text in chunks, then the marker, as long as c
// has room, and forgets b once all is sent. Called with h.mu held.
func (h *hub) drain(c *rpc.Conn, sub *subscription, b *outputBacklog) {
	for len(b.text) > 0 {
		if behind(c) {
			return
		}
		n := min(len(b.text), outputChunkBytes)
		if !h.sendText(c, b, string(b.text[:n]), 0) {
			return
		}
		b.text = b.text[n:]
	}
	if b.omitted > 0 {
		if behind(c) {
			return
		}
		marker := fmt.Sprintf("\n[sessiond: %d bytes of output left out here: this client fell behind; the tool result keeps the output]\n", b.omitted)
		if !h.sendText(c, b, marker, b.omitted) {
			return
		}
	}
	delete(sub.backlog, b.callID)
}

// sendText sends one tool.output frame for b; omitted > 0 marks the
// marker frame (payload omitted_bytes).
func (h *hub) sendText(c *rpc.Conn, b *outputBacklog, text string, omitted int64) bool {
	payload := protocol.ToolOutputPayload{ToolCallID: b.callID, Text: text, OmittedBytes: omitted}
	body, err := json.Marshal(payload)
	if err != nil {
		return false
	}
	ev := b.ev
	ev.Payload = body
	frame, err := notificationFrame(ev)
	if err != nil {
		return false
	}
	return c.NotifyRaw(frame)
}

// flushBacklog runs before a tool.completed or turn.completed reaches c:
// the held-back output of that call (or of every call, at the turn's end)
// goes first, as far as c has room, and whatever is left is counted into
// one marker, so the client sees the output end before the result. Called
// with h.mu held.
func (h *hub) flushBacklog(c *rpc.Conn, sub *subscription, e store.Event) {
	if len(sub.backlog) == 0 {
		return
	}
	var callID string // "": the turn ended, every call's output goes
	if pl, err := protocol.DecodeEvent(protocol.EventType(e.Type), e.Payload); err == nil {
		if p, ok := pl.(protocol.ToolCompletedPayload); ok {
			callID = p.ToolCallID
		}
	}
	for id, b := range sub.backlog {
		if callID != "" && id != callID {
			continue
		}
		h.drain(c, sub, b)
		if sub.backlog[id] == nil {
			continue
		}
		// Still behind: leave the rest out, say so in one frame (the
		// queue's free half has room for it).
		b.omitted += int64(len(b.text))
		b.text = nil
		if c.QueuedNotifications() < c.SendQueueLimit()-1 {
			marker := fmt.Sprintf("\n[sessiond: %d bytes of output left out here: this client fell behind; the tool result keeps the output]\n", b.omitted)
			h.sendText(c, b, marker, b.omitted)
		}
		delete(sub.backlog, id)
	}
}
