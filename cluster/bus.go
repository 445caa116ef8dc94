package cluster

import (
	"sync"

	"github.com/sessiond/sessiond/store"
)

// The channels between daemons (SCALEOUT.md).
const (
	// ChannelEvents carries "<session_id>:<seq>": a session event was
	// committed. Subscribers on every daemon read the events table after
	// their last delivered seq.
	ChannelEvents = "sessiond_events"
	// ChannelSessions carries "<session_id>": something the session's
	// owner must look at (queued input, prompt answered, interrupt
	// requested, owner changed).
	ChannelSessions = "sessiond_sessions"
)

// Bus delivers notifications between the daemons of one store after the
// transaction that sent them committed. A notification is a hint: the
// receiver reads the tables. After a listener's connection was lost, fn("")
// is called: notifications may have been missed, resync from the tables.
//
// On this branch the transport is in-process (every Bus of one database
// file in this process shares it), which is exactly the SQLite semantics; on PostgreSQL it is
// the store's Tx.Notify / DB.Listen (pg_notify and LISTEN).
//
// Each daemon has its own Bus. In-process, a notification is not delivered
// to the Bus that sent it: a daemon acts on its own writes directly.
type Bus struct {
	db  *store.DB
	hub *localHub
	id  int
}

type localHub struct {
	mu    sync.Mutex
	next  int
	buses int
	subs  map[string]map[int]listener
}

type listener struct {
	bus int
	fn  func(string)
}

var (
	hubsMu sync.Mutex
	hubs   = map[string]*localHub{} // by database file: one database, one hub

)

// NewBus returns the bus of db.
func NewBus(db *store.DB) *Bus {
	hubsMu.Lock()
	defer hubsMu.Unlock()
	h := hubs[db.Path()]
	if h == nil {
		h = &localHub{subs: map[string]map[int]listener{}}
		hubs[db.Path()] = h
	}
	h.mu.Lock()
	h.buses++
	id := h.buses
	h.mu.Unlock()
	return &Bus{db: db, hub: h, id: id}
}

// Notify sends payload on channel when tx commits (never if it rolls
// back). fn of every Listen on the channel, on every daemon of the store,
// receives it; it must not block.
func (b *Bus) Notify(tx *store.Tx, channel, payload string) {
	tx.OnCommit(func() { b.hub.deliver(b.id, channel, payload) })
}

// Publish sends payload on channel outside any transaction, for what is
// already committed (the store's event sink announcing events). It never
// blocks: on PostgreSQL the notifications are batched into one
// pg_notify transaction; in-process they are delivered at once.
func (b *Bus) Publish(channel, payload string) {
	b.hub.deliver(b.id, channel, payload)
}

// Listen calls fn with the payload of every notification on channel until
// stop is called. fn runs on the notifying goroutine (SQLite: the store's
// committer) and must not block.
func (b *Bus) Listen(channel string, fn func(payload string)) (stop func()) {
	h := b.hub
	h.mu.Lock()
	id := h.next
	h.next++
	if h.subs[channel] == nil {
		h.subs[channel] = map[int]listener{}
	}
	h.subs[channel][id] = listener{bus: b.id, fn: fn}
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		delete(h.subs[channel], id)
		h.mu.Unlock()
	}
}

func (h *localHub) deliver(from int, channel, payload string) {
	h.mu.Lock()
	fns := make([]func(string), 0, len(h.subs[channel]))
	for _, l := range h.subs[channel] {
		if l.bus != from {
			fns = append(fns, l.fn)
		}
	}
	h.mu.Unlock()
	for _, fn := range fns {
		fn(payload)
	}
}
