package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
	"github.com/sessiond/sessiond/store"
)

// hub fans session events out to the connections subscribed by
// session.resume. Durable events come from the store's event sink after
// commit, in commit order (the fast path), and, for events committed by
// other daemons of a cluster, from the events table after a
// ChannelEvents notification (catch-up). Each subscription delivers seq
// lastSeq+1 next and nothing else, so order and exactly-once hold whichever
// path brings an event; a gap makes the catch-up read the table, no
// further than the highest seq announced or published here. Deltas (seq
// null) come from the agent directly on the daemon that runs the turn and,
// on PostgreSQL, from that daemon's outbox on the others (deltas.go).
// Delivery never blocks: a connection that cannot keep up is closed by
// rpc.
type hub struct {
	mu   sync.Mutex
	subs map[string]map[*rpc.Conn]*subscription
	log  *slog.Logger
	// seen is the highest seq announced by a daemon or published here, by
	// session with subscribers: the catch-up delivers no further.
	seen map[string]int64

	// The catch-up (startCatchUp): sessions whose subscribers miss events.
	db       *store.DB
	behind   map[string]bool
	retries  map[string]int // failed catch-up reads in a row, by session
	signal   chan struct{}
	stopCU   chan struct{}
	cuDone   chan struct{}
	notifyFn func(sessionID string, seq int64) // announces local events to the other daemons

	// Streaming across daemons (deltas.go): this daemon's id, its outbox
	// (nil but on PostgreSQL), the seq of the last event published here by
	// session whose turn runs here (turn.started to turn.completed), and
	// the next offset of every stream of another daemon by session.
	origin   int64
	outbox   *deltaOutbox
	localSeq map[string]int64
	remote   map[string]map[remoteKey]int64
}

// subscription is one connection's interest in one session. Until released
// (after the resume response is queued), durable events are buffered so the
// client sees the snapshot first; on release, events already reflected in
// the snapshot (seq <= lastSeq) are dropped. Once released, lastSeq is the
// last seq delivered.
type subscription struct {
	released bool
	lastSeq  int64
	events   []store.Event // buffered until released
	// backlog holds tool output held back while the connection is behind,
	// by tool_call_id (see floods.go).
	backlog map[string]*outputBacklog
	// held are deltas of another daemon waiting for the event they follow
	// (deltas.go).
	held []heldDelta
}

func newHub(log *slog.Logger) *hub {
	return &hub{subs: map[string]map[*rpc.Conn]*subscription{}, log: log, seen: map[string]int64{},
		behind: map[string]bool{}, retries: map[string]int{}, signal: make(chan struct{}, 1),
		localSeq: map[string]int64{}, remote: map[string]map[remoteKey]int64{}}
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
		buffered := sub.events
		sub.events = nil
		sub.released, sub.lastSeq = true, lastSeq
		for _, e := range buffered {
			h.deliverLocked(sessionID, c, sub, e)
		}
		h.releaseHeldLocked(c, sub)
		if h.seen[sessionID] > sub.lastSeq {
			h.markBehindLocked(sessionID)
		}
	}
}

func (h *hub) unsubscribe(c *rpc.Conn, sessionID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := h.subs[sessionID]; m != nil {
		delete(m, c)
		if len(m) == 0 {
			delete(h.subs, sessionID)
			delete(h.seen, sessionID)
			delete(h.remote, sessionID)
		}
	}
}

func notificationFrame(ev protocol.Event) ([]byte, error) {
	return json.Marshal(struct {
		JSONRPC string         `json:"jsonrpc"`
		Method  string         `json:"method"`
		Params  protocol.Event `json:"params"`
	}{rpc.Version, protocol.NotifySessionEvent, ev})
}

// wireEvent converts a stored event to its notification params.
func wireEvent(e store.Event) protocol.Event {
	seq := e.Seq
	ev := protocol.Event{SessionID: e.SessionID, Seq: &seq, Type: protocol.EventType(e.Type), ExecutionGeneration: e.ExecutionGeneration, Payload: e.Payload}
	if e.AdmissionID != nil {
		ev.AdmissionID = *e.AdmissionID
	}
	return ev
}

// publish delivers a committed durable event of this daemon; it is the
// store's event sink (the fast path). It also announces the event to the
// other daemons.
func (h *hub) publish(e store.Event) {
	h.mu.Lock()
	notify := h.notifyFn
	if h.outbox != nil {
		// The last event of a session whose turn runs here (deltas come
		// from such turns only): from turn.started to turn.completed.
		_, running := h.localSeq[e.SessionID]
		switch protocol.EventType(e.Type) {
		case protocol.EventTurnCompleted:
			delete(h.localSeq, e.SessionID)
			h.outbox.forget(e.SessionID)
		case protocol.EventTurnStarted:
			h.localSeq[e.SessionID] = e.Seq
		default:
			if running {
				h.localSeq[e.SessionID] = e.Seq
			}
		}
	}
	m := h.subs[e.SessionID]
	if len(m) > 0 && e.Seq > h.seen[e.SessionID] {
		h.seen[e.SessionID] = e.Seq
	}
	for c, sub := range m {
		if !sub.released {
			sub.events = append(sub.events, e)
			continue
		}
		h.deliverLocked(e.SessionID, c, sub, e)
	}
	h.mu.Unlock()
	if notify != nil {
		notify(e.SessionID, e.Seq)
	}
}

// deliverLocked sends e to a released subscription when it is the next seq
// it needs, skips it when it was delivered already, and asks the catch-up
// for the missing ones on a gap. Called with h.mu held.
func (h *hub) deliverLocked(sessionID string, c *rpc.Conn, sub *subscription, e store.Event) {
	switch {
	case e.Seq <= sub.lastSeq:
		return
	case e.Seq > sub.lastSeq+1:
		// Events of another daemon committed before it: the catch-up
		// reads them from the table, this one with them.
		h.markBehindLocked(sessionID)
		return
	}
	frame, err := notificationFrame(wireEvent(e))
	if err != nil {
		h.log.Error("encode event", "type", e.Type, "err", err)
		sub.lastSeq = e.Seq
		return
	}
	if t := protocol.EventType(e.Type); t == protocol.EventToolCompleted || t == protocol.EventTurnCompleted {
		h.flushBacklog(c, sub, e) // the held-back output comes before its end
	}
	c.NotifyRaw(frame)
	sub.lastSeq = e.Seq
	if len(sub.held) > 0 {
		h.releaseHeldLocked(c, sub)
	}
	if protocol.EventType(e.Type) == protocol.EventTurnCompleted {
		delete(h.remote, sessionID)
	}
}

func (h *hub) markBehindLocked(sessionID string) {
	h.behind[sessionID] = true
	select {
	case h.signal <- struct{}{}:
	default:
	}
}

// remoteEvent is the ChannelEvents listener: payload "<session_id>:<seq>"
// announces an event committed by some daemon (this one included). It
// never blocks: a session whose subscribers lack that seq is handed to the
// catch-up; "" (notifications may have been lost) hands every session.
func (h *hub) remoteEvent(payload string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if payload == "" {
		for id := range h.subs {
			// Announcements may be lost: the catch-up delivers whatever
			// the table holds from now on.
			h.seen[id] = math.MaxInt64
			h.markBehindLocked(id)
		}
		return
	}
	i := strings.LastIndexByte(payload, ':')
	if i < 0 {
		return
	}
	sessionID := payload[:i]
	seq, err := strconv.ParseInt(payload[i+1:], 10, 64)
	if err != nil {
		return
	}
	m := h.subs[sessionID]
	if len(m) == 0 {
		return
	}
	if seq > h.seen[sessionID] {
		h.seen[sessionID] = seq
	}
	for _, sub := range m {
		if sub.released && sub.lastSeq < seq {
			h.markBehindLocked(sessionID)
			return
		}
	}
}

// startCatchUp starts the goroutine that reads, from db, the events the
// subscribers of a session lack, and delivers them in order.
func (h *hub) startCatchUp(db *store.DB, notify func(sessionID string, seq int64)) {
	h.mu.Lock()
	h.db, h.notifyFn = db, notify
	h.mu.Unlock()
	h.stopCU, h.cuDone = make(chan struct{}), make(chan struct{})
	go h.catchUpLoop()
}

func (h *hub) stopCatchUp() {
	h.mu.Lock()
	h.notifyFn = nil
	h.mu.Unlock()
	if h.stopCU != nil {
		close(h.stopCU)
		<-h.cuDone
		h.stopCU = nil
	}
}

func (h *hub) catchUpLoop() {
	defer close(h.cuDone)
	for {
		select {
		case <-h.stopCU:
			return
		case <-h.signal:
		}
		h.mu.Lock()
		ids := make([]string, 0, len(h.behind))
		for id := range h.behind {
			ids = append(ids, id)
		}
		h.behind = map[string]bool{}
		h.mu.Unlock()
		for _, id := range ids {
			h.catchUp(id)
		}
	}
}

// catchUp reads the events of sessionID after the oldest lastSeq of its
// released subscribers and delivers each subscriber what it lacks, in
// order. When retention pruned events a subscriber lacks, that subscriber
// is closed (1008): its client resumes and gets snapshot_required.
func (h *hub) catchUp(sessionID string) {
	h.mu.Lock()
	from := int64(-1)
	for _, sub := range h.subs[sessionID] {
		if sub.released && (from < 0 || sub.lastSeq < from) {
			from = sub.lastSeq
		}
	}
	h.mu.Unlock()
	if from < 0 {
		return
	}
	evs, complete, err := h.eventsAfter(sessionID, from)
	if err != nil {
		h.log.Warn("read events committed by another daemon; retrying", "session_id", sessionID, "err", err)
		h.retryLater(sessionID)
		return
	}
	h.mu.Lock()
	delete(h.retries, sessionID)
	h.mu.Unlock()
	if complete {
		h.mu.Lock()
		for c, sub := range h.subs[sessionID] {
			if sub.released {
				h.deliverSeenLocked(sessionID, c, sub, evs)
			}
		}
		h.mu.Unlock()
		return
	}
	// Rare: some subscriber is behind the retained window. Judge each on
	// its own seq, reading without the lock.
	type one struct {
		c   *rpc.Conn
		sub *subscription
		seq int64
	}
	var subs []one
	h.mu.Lock()
	for c, sub := range h.subs[sessionID] {
		if sub.released {
			subs = append(subs, one{c, sub, sub.lastSeq})
		}
	}
	h.mu.Unlock()
	for _, o := range subs {
		own, ok, err := h.eventsAfter(sessionID, o.seq)
		if err != nil {
			h.log.Warn("read events committed by another daemon; retrying", "session_id", sessionID, "err", err)
			h.retryLater(sessionID)
			continue
		}
		h.mu.Lock()
		switch {
		case h.subs[sessionID][o.c] != o.sub:
		case !ok:
			o.c.Close(websocket.StatusPolicyViolation, "session events were pruned past this subscription; resume")
		default:
			h.deliverSeenLocked(sessionID, o.c, o.sub, own)
		}
		h.mu.Unlock()
	}
}

// deliverSeenLocked delivers the events read by the catch-up, as far as
// seen: an event committed but not yet announced (nor published here)
// waits for its announcement, which comes after the deltas its daemon
// streamed before it (deltas.go), so that they keep that daemon's order.
// Called with h.mu held.
func (h *hub) deliverSeenLocked(sessionID string, c *rpc.Conn, sub *subscription, evs []store.Event) {
	limit := h.seen[sessionID]
	for _, e := range evs {
		if e.Seq > limit {
			return
		}
		h.deliverLocked(sessionID, c, sub, e)
	}
}

// retryLater hands sessionID to the catch-up again after a backoff
// (100ms doubling up to 5s while its reads keep failing): the events a
// failed read missed are announced once only, so nothing else would bring
// them while the session stays quiet.
func (h *hub) retryLater(sessionID string) {
	h.mu.Lock()
	n := h.retries[sessionID]
	h.retries[sessionID] = n + 1
	stop := h.stopCU
	h.mu.Unlock()
	d := min(100*time.Millisecond<<min(n, 6), 5*time.Second)
	go func() {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-stop:
			return
		}
		h.mu.Lock()
		if len(h.subs[sessionID]) > 0 {
			h.markBehindLocked(sessionID)
		} else {
			delete(h.retries, sessionID)
		}
		h.mu.Unlock()
	}()
}

func (h *hub) eventsAfter(sessionID string, after int64) (evs []store.Event, complete bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = h.db.ReadTx(ctx, func(tx *store.Reads) error {
		var err error
		evs, complete, err = h.db.EventsAfter(tx, sessionID, after)
		return err
	})
	return evs, complete, err
}

// publishDelta delivers an ephemeral event (seq null, not stored) to
// released subscribers.
func (h *hub) publishDelta(sessionID string, typ protocol.EventType, admissionID string, gen int64, payload any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.outbox != nil {
		switch p := payload.(type) {
		case protocol.MessageDeltaPayload:
			h.outbox.add(sessionID, typ, admissionID, gen, h.localSeq[sessionID], "", p.Text)
		case protocol.ToolOutputPayload:
			h.outbox.add(sessionID, typ, admissionID, gen, h.localSeq[sessionID], p.ToolCallID, p.Text)
		}
	}
	m := h.subs[sessionID]
	if len(m) == 0 {
		return
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return
	}
	ev := protocol.Event{SessionID: sessionID, Type: typ, AdmissionID: admissionID, Payload: body}
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
		if typ == protocol.EventToolOutput {
			h.sendOutput(c, sub, ev, frame)
			continue
		}
		c.NotifyRaw(frame)
	}
}
