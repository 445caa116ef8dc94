package cluster

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
	// ChannelDeltas carries a JSON frame of streamed deltas (message.delta,
	// tool.output) of a turn, from the daemon that runs it to every other
	// daemon (docs/scale-out.md, "Streaming across daemons"). Unlike the
	// other two it is the data itself, not a hint: nothing of it is stored.
	ChannelDeltas = "sessiond_deltas"
)

// MaxPayload is the largest notification payload in bytes: PostgreSQL
// refuses one of 8000 bytes or more.
const MaxPayload = 7999

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
	hub *localHub // SQLite
	id  int
	pub *publisher // PostgreSQL
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

// NewBus returns a bus on db. Close it when done.
func NewBus(db *store.DB) *Bus {
	if db.Driver() == store.Postgres {
		return &Bus{db: db, pub: newPublisher(db)}
	}
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
	if b.pub != nil {
		tx.Notify(channel, payload)
		return
	}
	tx.OnCommit(func() { b.hub.deliver(b.id, channel, payload) })
}

// Publish sends payload on channel outside any transaction, for what is
// already committed (the store's event sink announcing events). It never
// blocks: on PostgreSQL the notifications are batched into one
// pg_notify transaction; in-process they are delivered at once.
func (b *Bus) Publish(channel, payload string) {
	if b.pub != nil {
		b.pub.add(channel, payload)
		return
	}
	b.hub.deliver(b.id, channel, payload)
}

// Notification is one payload for one channel (Send).
type Notification struct {
	Channel, Payload string
}

// Send sends ns now, in order, outside any other transaction: on
// PostgreSQL one transaction of pg_notify (each payload must be at most
// MaxPayload bytes, and the notifications of one call must differ:
// identical ones are delivered once); in-process they are delivered at
// once. The receivers of one sender get the notifications of successive
// calls in call order, whatever their channels (one LISTEN connection
// hears them all). It blocks for the transaction (callers send from a
// goroutine of their own) and returns its error; nothing is retried.
func (b *Bus) Send(ctx context.Context, ns []Notification) error {
	if len(ns) == 0 {
		return nil
	}
	if b.pub == nil {
		for _, n := range ns {
			b.hub.deliver(b.id, n.Channel, n.Payload)
		}
		return nil
	}
	for i, n := range ns {
		if len(n.Payload) > MaxPayload {
			return fmt.Errorf("cluster: notification %d on %s is %d bytes, more than %d", i, n.Channel, len(n.Payload), MaxPayload)
		}
	}
	return b.db.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("notify")
		for _, n := range ns {
			tx.Notify(n.Channel, n.Payload)
		}
		return nil
	})
}

// Close stops the publisher of a PostgreSQL bus after sending what it
// holds; Listen's stops are separate.
func (b *Bus) Close() {
	if b.pub != nil {
		b.pub.close()
	}
}

// Listen calls fn with the payload of every notification on channel until
// stop is called. fn runs on the notifying goroutine (SQLite: the store's
// committer) and must not block.
func (b *Bus) Listen(channel string, fn func(payload string)) (stop func()) {
	if b.pub != nil {
		return b.db.Listen(channel, fn)
	}
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

// publisher batches Publish on PostgreSQL: one transaction of pg_notify
// for whatever queued up while the previous one ran. For ChannelEvents
// only the highest seq of each session is sent (a receiver reads every
// event after its last one anyway).
type publisher struct {
	db      *store.DB
	mu      sync.Mutex
	pending map[string]string // channel + "\x00" + key -> payload
	order   []string
	signal  chan struct{}
	stop    chan struct{}
	done    chan struct{}
	// failures counts the batches whose transaction failed (tests).
	failures atomic.Int64
}

func newPublisher(db *store.DB) *publisher {
	p := &publisher{db: db, pending: map[string]string{}, signal: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *publisher) add(channel, payload string) {
	key := payload
	if channel == ChannelEvents {
		if i := strings.LastIndexByte(payload, ':'); i >= 0 {
			key = payload[:i]
		}
	}
	k := channel + "\x00" + key
	p.mu.Lock()
	old, ok := p.pending[k]
	if !ok {
		p.order = append(p.order, k)
	}
	if !ok || channel != ChannelEvents || seqOf(payload) > seqOf(old) {
		p.pending[k] = payload
	}
	p.mu.Unlock()
	select {
	case p.signal <- struct{}{}:
	default:
	}
}

func seqOf(payload string) int64 {
	i := strings.LastIndexByte(payload, ':')
	n, _ := strconv.ParseInt(payload[i+1:], 10, 64)
	return n
}

func (p *publisher) run() {
	defer close(p.done)
	for {
		select {
		case <-p.signal:
		case <-p.stop:
			p.flush()
			return
		}
		// A failed batch is sent again after a backoff (100ms doubling up
		// to 5s): it is the only announcement of events already committed.
		for n := 0; !p.flush(); n++ {
			t := time.NewTimer(min(100*time.Millisecond<<min(n, 6), 5*time.Second))
			select {
			case <-t.C:
			case <-p.stop:
				t.Stop()
				p.flush()
				return
			}
		}
	}
}

// flush sends what is pending in one transaction; when it fails, the batch
// is pending again (merged with what was added meanwhile) and flush
// returns false.
func (p *publisher) flush() bool {
	p.mu.Lock()
	pending, order := p.pending, p.order
	p.pending, p.order = map[string]string{}, nil
	p.mu.Unlock()
	if len(order) == 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.db.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("notify")
		for _, k := range order {
			ch, _, _ := strings.Cut(k, "\x00")
			tx.Notify(ch, pending[k])
		}
		return nil
	}); err != nil {
		p.failures.Add(1)
		p.mu.Lock()
		for _, k := range p.order {
			if _, ok := pending[k]; !ok {
				order = append(order, k)
			}
		}
		for k, payload := range p.pending {
			ch, _, _ := strings.Cut(k, "\x00")
			if old, ok := pending[k]; !ok || ch != ChannelEvents || seqOf(payload) > seqOf(old) {
				pending[k] = payload
			}
		}
		p.pending, p.order = pending, order
		p.mu.Unlock()
		return false
	}
	return true
}

func (p *publisher) close() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}
