package daemon

import (
	"encoding/json"
	"log/slog"
	"sync"

	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
	"github.com/sessiond/sessiond/store"
)

// hub fans session events out to the connections subscribed by
// session.resume. Durable events come from the store's event sink after
// commit, in commit order; deltas (seq null) come from the agent directly.
// Delivery never blocks: a connection that cannot keep up is closed by rpc.
type hub struct {
	mu   sync.Mutex
	subs map[string]map[*rpc.Conn]*subscription
	log  *slog.Logger
}

// subscription is one connection's interest in one session. Until released
// (after the resume response is queued), durable events are buffered so the
// client sees the snapshot first; on release, events already reflected in
// the snapshot (seq <= lastSeq) are dropped.
type subscription struct {
	released bool
	lastSeq  int64
	buffered [][]byte
	seqs     []int64
	// backlog holds tool output held back while the connection is behind,
	// by tool_call_id (see floods.go).
	backlog map[string]*outputBacklog
}

func newHub(log *slog.Logger) *hub {
	return &hub{subs: map[string]map[*rpc.Conn]*subscription{}, log: log}
}

// subscribe registers c for sessionID in buffering mode and returns the
// function that releases it after the snapshot with lastSeq was queued.
func (h *hub) subscribe(c *rpc.Conn, sessionID string) (release func(lastSeq int64)) {
	h.mu.Lock()
	m := h.subs[sessionID]
	if m == nil {
		m = map[*rpc.Conn]*subscription{}
		h.subs[sessionID] = m
	}
	_, again := m[c]
	sub := &subscription{}
	m[c] = sub
	h.mu.Unlock()
	if !again {
		// One hook per connection and session: a client that resumes the
		// same session repeatedly must not grow the connection's hooks.
		c.OnClose(func() { h.unsubscribe(c, sessionID) })
	}
	return func(lastSeq int64) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.subs[sessionID][c] != sub {
			return
		}
		for i, frame := range sub.buffered {
			if sub.seqs[i] > lastSeq {
				c.NotifyRaw(frame)
			}
		}
		sub.buffered, sub.seqs = nil, nil
		sub.released, sub.lastSeq = true, lastSeq
	}
}

func (h *hub) unsubscribe(c *rpc.Conn, sessionID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := h.subs[sessionID]; m != nil {
		delete(m, c)
		if len(m) == 0 {
			delete(h.subs, sessionID)
		}
	}
}

func notificationFrame(ev rpc.Event) ([]byte, error) {
	return json.Marshal(struct {
		JSONRPC string    `json:"jsonrpc"`
		Method  string    `json:"method"`
		Params  rpc.Event `json:"params"`
	}{rpc.Version, rpc.NotifySessionEvent, ev})
}

// wireEvent converts a stored event to its notification params.
func wireEvent(e store.Event) rpc.Event {
	seq := e.Seq
	ev := rpc.Event{SessionID: e.SessionID, Seq: &seq, Type: protocol.EventType(e.Type), ExecutionGeneration: e.ExecutionGeneration, Payload: e.Payload}
	if e.AdmissionID != nil {
		ev.AdmissionID = *e.AdmissionID
	}
	return ev
}

// publish delivers a committed durable event; it is the store's event sink.
func (h *hub) publish(e store.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.subs[e.SessionID]
	if len(m) == 0 {
		return
	}
	frame, err := notificationFrame(wireEvent(e))
	if err != nil {
		h.log.Error("encode event", "type", e.Type, "err", err)
		return
	}
	for c, sub := range m {
		if !sub.released {
			sub.buffered = append(sub.buffered, frame)
			sub.seqs = append(sub.seqs, e.Seq)
			continue
		}
		if e.Seq > sub.lastSeq {
			if e.Type == "tool.completed" || e.Type == "turn.completed" {
				h.flushBacklog(c, sub, e) // the held-back output comes before its end
			}
			c.NotifyRaw(frame)
		}
	}
}

// publishDelta delivers an ephemeral event (seq null, not stored) to
// released subscribers.
func (h *hub) publishDelta(sessionID string, typ protocol.EventType, admissionID string, gen int64, payload any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.subs[sessionID]
	if len(m) == 0 {
		return
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return
	}
	ev := rpc.Event{SessionID: sessionID, Type: typ, AdmissionID: admissionID, Payload: body}
	if gen > 0 {
		ev.ExecutionGeneration = &gen
	}
	frame, err := notificationFrame(ev)
	if err != nil {
		return
	}
	for c, sub := range m {
		if !sub.released {
			continue
		}
		if typ == "tool.output" {
			h.sendOutput(c, sub, ev, frame)
			continue
		}
		c.NotifyRaw(frame)
	}
}
