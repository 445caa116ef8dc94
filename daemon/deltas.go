package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/sessiond/sessiond/cluster"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
)

// Streaming across daemons (docs/scale-out.md). The deltas of a turn
// (message.delta, tool.output: seq null, never stored) reach the
// subscribers of the daemon that runs it directly (hub.publishDelta), and
// those of every other daemon of a PostgreSQL cluster as frames on
// cluster.ChannelDeltas:
//
//   - the owner queues each delta in its outbox, which one goroutine sends
//     as soon as the previous send is done: what queued up meanwhile is
//     coalesced (adjacent deltas of one stream — the same session, type,
//     admission, generation, tool call and preceding event — become one
//     frame), and every frame stays within cluster.MaxPayload;
//   - a frame carries its stream's byte offset, so a receiver sees a gap:
//     tool output left out (the outbox bounds what it holds, as a slow
//     connection's backlog does) becomes the marker frame a slow client
//     gets on one daemon (omitted_bytes), and a lost message.delta closes
//     the subscriber's connection (1008) as one daemon does when it cannot
//     queue one: its client resumes;
//   - a frame carries the seq of the last durable event of its session the
//     owner had published before it (after_seq): a receiver holds it for a
//     subscriber that has not got that event yet (the catch-up reads it
//     from the table), so durable events and deltas keep the owner's order.

const (
	// outboxBytes bounds the tool output an owner holds for the other
	// daemons while the database is slow; beyond it output is left out and
	// counted (message text is never left out).
	outboxBytes = 1 << 20
	// deltaChunkBytes bounds the text of one frame before encoding; a
	// frame whose encoding is still over cluster.MaxPayload (escapes) is
	// split further.
	deltaChunkBytes = 6 << 10
	// heldDeltas bounds the deltas a receiver holds for one subscription
	// until it has the event they follow; beyond it the connection is
	// closed (1008) and its client resumes.
	heldDeltas = 4096
)

// deltaFrame is one frame on cluster.ChannelDeltas, in JSON.
type deltaFrame struct {
	// Origin is the sending daemon's id (cluster.DaemonID).
	Origin int64 `json:"origin"`
	// N numbers the frames of one origin, from 1, so that identical frames
	// of one transaction stay distinct.
	N           int64              `json:"n"`
	SessionID   string             `json:"session_id"`
	AfterSeq    int64              `json:"after_seq"`
	Type        protocol.EventType `json:"type"`
	AdmissionID string             `json:"admission_id,omitempty"`
	Generation  int64              `json:"generation,omitempty"`
	ToolCallID  string             `json:"tool_call_id,omitempty"`
	// Offset is the byte offset of Text in its stream: the turn's
	// message text (per session, admission and generation) or one tool
	// call's output.
	Offset int64  `json:"offset"`
	Text   string `json:"text"`
}

// streamKey names one stream of deltas.
type streamKey struct {
	session, admission, call string
	typ                      protocol.EventType
	gen                      int64
}

func (f *deltaFrame) key() streamKey {
	return streamKey{f.SessionID, f.AdmissionID, f.ToolCallID, f.Type, f.Generation}
}

// deltaOutbox is the owner's side: deltas and event announcements queued
// for the other daemons, sent in the order they were queued by one
// goroutine (one transaction at a time), so that a receiver hears a
// delta before the announcement of any event committed after it.
type deltaOutbox struct {
	origin int64
	send   func(ctx context.Context, ns []cluster.Notification) error
	log    interface {
		Warn(msg string, args ...any)
	}

	mu      sync.Mutex
	pending []outItem
	bytes   int                 // tool output text pending
	offsets map[streamKey]int64 // next offset of each stream with something sent or pending
	n       int64
	signal  chan struct{}
	stop    chan struct{}
	done    chan struct{}
	// sent counts frames handed to send; failed the sends that failed (tests, metrics).
	sent, failed int64
}

// outItem is a delta frame or, when frame is nil, the announcement of a
// committed event (cluster.ChannelEvents "<session_id>:<seq>").
type outItem struct {
	frame   *deltaFrame
	session string
	seq     int64
}

func newDeltaOutbox(origin int64, send func(ctx context.Context, ns []cluster.Notification) error, log interface{ Warn(string, ...any) }) *deltaOutbox {
	o := &deltaOutbox{origin: origin, send: send, log: log, offsets: map[streamKey]int64{},
		signal: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go o.run()
	return o
}

// announce queues the announcement of a committed event (it replaces a
// pending one of the same session right before it: receivers read every
// event up to the seq). Announcements are never dropped: a failed send is
// retried with them.
func (o *deltaOutbox) announce(sessionID string, seq int64) {
	o.mu.Lock()
	if n := len(o.pending); n > 0 && o.pending[n-1].frame == nil && o.pending[n-1].session == sessionID {
		o.pending[n-1].seq = max(o.pending[n-1].seq, seq)
	} else {
		o.pending = append(o.pending, outItem{session: sessionID, seq: seq})
	}
	o.mu.Unlock()
	o.poke()
}

// add queues one delta; it never blocks. afterSeq is the seq of the last
// durable event of the session published on this daemon before it.
func (o *deltaOutbox) add(sessionID string, typ protocol.EventType, admissionID string, gen, afterSeq int64, callID, text string) {
	if text == "" {
		return
	}
	f := &deltaFrame{Origin: o.origin, SessionID: sessionID, AfterSeq: afterSeq, Type: typ, AdmissionID: admissionID,
		Generation: gen, ToolCallID: callID}
	k := f.key()
	o.mu.Lock()
	off := o.offsets[k]
	o.offsets[k] = off + int64(len(text))
	if typ == protocol.EventToolOutput && o.bytes+len(text) > outboxBytes {
		// Left out: the receivers see the offset jump and mark it.
		o.mu.Unlock()
		return
	}
	if typ == protocol.EventToolOutput {
		o.bytes += len(text)
	}
	if n := len(o.pending); n > 0 {
		if last := o.pending[n-1].frame; last != nil && last.key() == k && last.AfterSeq == afterSeq &&
			last.Offset+int64(len(last.Text)) == off && len(last.Text)+len(text) <= deltaChunkBytes {
			last.Text += text
			o.mu.Unlock()
			o.poke()
			return
		}
	}
	f.Offset, f.Text = off, text
	o.pending = append(o.pending, outItem{frame: f})
	o.mu.Unlock()
	o.poke()
}

// forget drops the offsets of a session's streams once its turn ended.
func (o *deltaOutbox) forget(sessionID string) {
	o.mu.Lock()
	for k := range o.offsets {
		if k.session == sessionID {
			delete(o.offsets, k)
		}
	}
	o.mu.Unlock()
}

func (o *deltaOutbox) poke() {
	select {
	case o.signal <- struct{}{}:
	default:
	}
}

func (o *deltaOutbox) run() {
	defer close(o.done)
	for {
		select {
		case <-o.signal:
		case <-o.stop:
			o.flush()
			return
		}
		// A failed send keeps its announcements pending and is retried
		// after a backoff (100ms doubling up to 5s): they are the only
		// news of events already committed.
		for n := 0; !o.flush(); n++ {
			t := time.NewTimer(min(100*time.Millisecond<<min(n, 6), 5*time.Second))
			select {
			case <-t.C:
			case <-o.stop:
				t.Stop()
				o.flush()
				return
			}
		}
	}
}

// flush sends what is pending as one transaction and reports whether it
// was sent. A failed send is not retried for its deltas (a live view: the
// receivers mark the gap), only for its announcements, which go back to
// the front of the queue.
func (o *deltaOutbox) flush() bool {
	o.mu.Lock()
	batch := o.pending
	o.pending, o.bytes = nil, 0
	o.mu.Unlock()
	if len(batch) == 0 {
		return true
	}
	var ns []cluster.Notification
	for _, it := range batch {
		if it.frame == nil {
			ns = append(ns, cluster.Notification{Channel: cluster.ChannelEvents, Payload: it.session + ":" + strconv.FormatInt(it.seq, 10)})
			continue
		}
		ns = o.encode(ns, it.frame)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := o.send(ctx, ns)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sent += int64(len(ns))
	if err == nil {
		return true
	}
	o.failed++
	var again []outItem
	for _, it := range batch {
		if it.frame == nil {
			again = append(again, it)
		}
	}
	o.pending = append(again, o.pending...)
	o.log.Warn("send streamed deltas and event announcements to the other daemons; retrying the announcements", "notifications", len(ns), "err", err)
	return false
}

// encode appends f's notifications: f itself, or f split at UTF-8
// boundaries until each encoding fits cluster.MaxPayload.
func (o *deltaOutbox) encode(out []cluster.Notification, f *deltaFrame) []cluster.Notification {
	o.mu.Lock()
	o.n++
	f.N = o.n
	o.mu.Unlock()
	b, err := json.Marshal(f)
	if err != nil {
		return out
	}
	if len(b) <= cluster.MaxPayload {
		return append(out, cluster.Notification{Channel: cluster.ChannelDeltas, Payload: string(b)})
	}
	if len(f.Text) <= 1 {
		return out
	}
	cut := len(f.Text) / 2
	for cut > 0 && !utf8.RuneStart(f.Text[cut]) {
		cut--
	}
	if cut == 0 {
		cut = len(f.Text) / 2
	}
	a, c := *f, *f
	a.Text, c.Text = f.Text[:cut], f.Text[cut:]
	c.Offset = f.Offset + int64(cut)
	return o.encode(o.encode(out, &a), &c)
}

func (o *deltaOutbox) close() {
	select {
	case <-o.stop:
	default:
		close(o.stop)
	}
	<-o.done
}

// startDeltas makes the hub send this daemon's deltas through out and
// know its own frames by origin.
func (h *hub) startDeltas(origin int64, out *deltaOutbox) {
	h.mu.Lock()
	h.origin, h.outbox = origin, out
	h.mu.Unlock()
}

// stopDeltas sends nothing more to the other daemons.
func (h *hub) stopDeltas() {
	h.mu.Lock()
	out := h.outbox
	h.outbox = nil
	h.mu.Unlock()
	if out != nil {
		out.close()
	}
}

// heldDelta is a delta from another daemon waiting for the event it
// follows.
type heldDelta struct {
	afterSeq int64
	ev       protocol.Event
	frame    []byte
}

// remoteDelta is the ChannelDeltas listener: it delivers a frame of
// another daemon to the released subscribers of its session, marking a
// gap first, or holds it for those that lack the event it follows. ""
// (notifications may have been lost) needs nothing: a lost frame shows as
// a gap in the next one of its stream.
func (h *hub) remoteDelta(payload string) {
	if payload == "" {
		return
	}
	var f deltaFrame
	if err := json.Unmarshal([]byte(payload), &f); err != nil || f.SessionID == "" ||
		(f.Type != protocol.EventMessageDelta && f.Type != protocol.EventToolOutput) {
		h.log.Warn("a malformed frame on the deltas channel", "err", err)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if f.Origin == h.origin {
		return // this daemon's own, delivered directly
	}
	m := h.subs[f.SessionID]
	if len(m) == 0 {
		delete(h.remote, f.SessionID)
		return
	}
	k := remoteKey{f.Origin, f.key()}
	streams := h.remote[f.SessionID]
	if streams == nil {
		streams = map[remoteKey]int64{}
		h.remote[f.SessionID] = streams
	}
	next, known := streams[k]
	streams[k] = f.Offset + int64(len(f.Text))
	if known && f.Offset < next {
		return // a repeat of what was delivered
	}
	gap := int64(0)
	if known && f.Offset > next {
		gap = f.Offset - next
	}
	var body []byte
	if f.Type == protocol.EventToolOutput {
		body, _ = json.Marshal(protocol.ToolOutputPayload{ToolCallID: f.ToolCallID, Text: f.Text})
	} else {
		body, _ = json.Marshal(protocol.MessageDeltaPayload{Text: f.Text})
	}
	ev := protocol.Event{SessionID: f.SessionID, Type: f.Type, AdmissionID: f.AdmissionID, Payload: body}
	if f.Generation > 0 {
		gen := f.Generation
		ev.ExecutionGeneration = &gen
	}
	frame, err := notificationFrame(ev)
	if err != nil {
		return
	}
	var marker heldDelta
	if gap > 0 && f.Type == protocol.EventToolOutput {
		text := fmt.Sprintf("\n[sessiond: %d bytes of output left out here: they did not reach this daemon in time; the tool result keeps the output]\n", gap)
		mb, _ := json.Marshal(protocol.ToolOutputPayload{ToolCallID: f.ToolCallID, Text: text, OmittedBytes: gap})
		mev := ev
		mev.Payload = mb
		if mf, err := notificationFrame(mev); err == nil {
			marker = heldDelta{f.AfterSeq, mev, mf}
		}
	}
	for c, sub := range m {
		if !sub.released {
			continue
		}
		if gap > 0 && f.Type == protocol.EventMessageDelta {
			c.Close(websocket.StatusPolicyViolation, "streamed message text from another daemon was lost; resume")
			continue
		}
		if marker.frame != nil {
			h.deliverDeltaLocked(c, sub, marker)
		}
		h.deliverDeltaLocked(c, sub, heldDelta{f.AfterSeq, ev, frame})
	}
}

// remoteKey names a stream of another daemon.
type remoteKey struct {
	origin int64
	streamKey
}

// deliverDeltaLocked sends d to c once the subscription has the event it
// follows, holding it until then. Called with h.mu held.
func (h *hub) deliverDeltaLocked(c *rpc.Conn, sub *subscription, d heldDelta) {
	if sub.lastSeq < d.afterSeq || len(sub.held) > 0 {
		if len(sub.held) >= heldDeltas {
			sub.held = nil
			c.Close(websocket.StatusPolicyViolation, "too many streamed deltas from another daemon wait for their events; resume")
			return
		}
		sub.held = append(sub.held, d)
		return
	}
	h.sendDeltaLocked(c, sub, d)
}

func (h *hub) sendDeltaLocked(c *rpc.Conn, sub *subscription, d heldDelta) {
	if d.ev.Type == protocol.EventToolOutput {
		h.sendOutput(c, sub, d.ev, d.frame)
		return
	}
	c.NotifyRaw(d.frame)
}

// releaseHeldLocked sends the held deltas whose event the subscription now
// has, in order. Called with h.mu held, after sub.lastSeq moved.
func (h *hub) releaseHeldLocked(c *rpc.Conn, sub *subscription) {
	i := 0
	for ; i < len(sub.held) && sub.held[i].afterSeq <= sub.lastSeq; i++ {
		h.sendDeltaLocked(c, sub, sub.held[i])
	}
	if i > 0 {
		sub.held = append(sub.held[:0], sub.held[i:]...)
	}
}
