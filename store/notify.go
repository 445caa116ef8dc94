package store

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Notify asks that payload be delivered on channel to every Listen of the
// database once this transaction commits; nothing is delivered when it
// rolls back (or, on PostgreSQL, for an attempt that is re-run). On
// PostgreSQL it is pg_notify at the end of the transaction, so every daemon
// on the database hears it; identical notifications of one transaction are
// delivered once, and a payload must stay below 8000 bytes. On SQLite the
// delivery is in-process. Channel names are fixed strings of the caller
// (docs: sessiond_events, sessiond_sessions).
func (t *Tx) Notify(channel, payload string) {
	if t.pg != nil {
		t.notices = append(t.notices, notice{channel, payload})
		return
	}
	db := t.db
	t.OnCommit(func() { db.notify.post(channel, payload) })
}

type notice struct{ channel, payload string }

// sendNotices runs pg_notify for the transaction's notices, just before
// COMMIT.
func (t *Tx) sendNotices() error {
	for _, n := range t.notices {
		if _, err := t.Exec("SELECT pg_notify(?, ?)", n.channel, n.payload); err != nil {
			return err
		}
	}
	return nil
}

// Listen calls fn with the payload of every notification on channel
// committed after Listen returned (Tx.Notify), in commit order, on one
// goroutine of the store shared by every Listen (fn must not block for
// long). fn("") means that notifications may have been missed: on
// PostgreSQL the LISTEN connection was lost and is back (or Listen returned
// before it could LISTEN, the database being unreachable for
// Options.BusyTimeout); the caller resyncs from the tables. stop ends the
// delivery: after it returned fn is not called again. It is safe to call
// stop more than once, and from fn.
func (db *DB) Listen(channel string, fn func(payload string)) (stop func()) {
	s := &sub{channel: channel, fn: fn, ready: make(chan struct{})}
	if db.pg != nil {
		return db.pg.lis.add(s)
	}
	return db.notify.add(s)
}

type sub struct {
	channel string
	fn      func(string)
	stopped atomic.Bool
	// ready is closed once the subscription is active (PostgreSQL: its
	// channel LISTENed on the current connection); resync is set when Listen
	// stopped waiting for that, so the activation calls fn("").
	ready     chan struct{}
	announced bool // ready is closed
	active    bool
	resync    bool
}

func (s *sub) call(payload string) {
	if !s.stopped.Load() {
		s.fn(payload)
	}
}

// notifier is SQLite's in-process delivery: committed notices queue up and
// one goroutine hands them to the subscribers.
type notifier struct {
	mu      sync.Mutex
	cond    *sync.Cond
	subs    map[string][]*sub
	queue   []notice
	closed  bool
	done    chan struct{}
	started bool
}

func (n *notifier) init(*DB) {
	n.cond = sync.NewCond(&n.mu)
	n.subs = map[string][]*sub{}
	n.done = make(chan struct{})
}

func (n *notifier) add(s *sub) func() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return func() {}
	}
	if !n.started {
		n.started = true
		go n.run()
	}
	n.subs[s.channel] = append(n.subs[s.channel], s)
	return func() { n.remove(s) }
}

func (n *notifier) remove(s *sub) {
	n.mu.Lock()
	n.subs[s.channel] = slices.DeleteFunc(n.subs[s.channel], func(x *sub) bool { return x == s })
	n.mu.Unlock()
	stopSub(s)
}

// stopSub ends the deliveries to s; a call of its fn in progress on the
// delivery goroutine finishes.
func stopSub(s *sub) { s.stopped.Store(true) }

func (n *notifier) post(channel, payload string) {
	n.mu.Lock()
	if !n.closed && len(n.subs[channel]) > 0 {
		n.queue = append(n.queue, notice{channel, payload})
		n.cond.Signal()
	}
	n.mu.Unlock()
}

func (n *notifier) run() {
	defer close(n.done)
	n.mu.Lock()
	for {
		for len(n.queue) == 0 && !n.closed {
			n.cond.Wait()
		}
		if n.closed {
			n.mu.Unlock()
			return
		}
		q := n.queue[0]
		n.queue = n.queue[1:]
		subs := slices.Clone(n.subs[q.channel])
		n.mu.Unlock()
		for _, s := range subs {
			s.call(q.payload)
		}
		n.mu.Lock()
	}
}

func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	started := n.started
	n.cond.Broadcast()
	n.mu.Unlock()
	if started {
		<-n.done
	}
}

// listener is PostgreSQL's delivery: one dedicated connection LISTENs on
// every channel that has a subscriber; it reconnects with a jittered
// backoff when lost, and then calls every fn with "".
type listener struct {
	db   *DB
	mu   sync.Mutex
	subs map[string][]*sub
	// cancelWait ends the connection's current wait for a notification;
	// pending says the subscriptions changed since the loop last read them
	// (poke sets one or the other).
	cancelWait context.CancelFunc
	pending    bool
	stop       chan struct{}
	done       chan struct{}
	run        bool
	pid        uint32 // backend pid of the current connection (tests)
}

func newListener(db *DB) *listener {
	return &listener{db: db, subs: map[string][]*sub{}, stop: make(chan struct{}), done: make(chan struct{})}
}

func (l *listener) add(s *sub) func() {
	l.mu.Lock()
	select {
	case <-l.stop:
		l.mu.Unlock()
		return func() {}
	default:
	}
	if !l.run {
		l.run = true
		go l.loop()
	}
	l.subs[s.channel] = append(l.subs[s.channel], s)
	l.mu.Unlock()
	l.poke()
	t := time.NewTimer(l.db.opt.BusyTimeout)
	defer t.Stop()
	select {
	case <-s.ready:
	case <-t.C:
		l.mu.Lock()
		if !s.active {
			s.resync = true
		}
		l.mu.Unlock()
	case <-l.stop:
	}
	return func() {
		l.mu.Lock()
		l.subs[s.channel] = slices.DeleteFunc(l.subs[s.channel], func(x *sub) bool { return x == s })
		if len(l.subs[s.channel]) == 0 {
			delete(l.subs, s.channel)
		}
		l.mu.Unlock()
		l.poke()
		stopSub(s)
	}
}

// poke tells the loop that the subscriptions changed: it ends the current
// wait, or marks the change for the loop to see before its next wait.
func (l *listener) poke() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancelWait != nil {
		l.cancelWait()
		l.cancelWait = nil
	} else {
		l.pending = true
	}
}

func (l *listener) close() {
	l.mu.Lock()
	close(l.stop)
	run := l.run
	l.mu.Unlock()
	if run {
		<-l.done
	}
}

// backendPID is the server process of the LISTEN connection, 0 while there
// is none.
func (l *listener) backendPID() uint32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pid
}

func (l *listener) loop() {
	defer close(l.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-l.stop
		cancel()
	}()
	backoff := 50 * time.Millisecond
	connected := false
	for ctx.Err() == nil {
		conn, err := pgx.ConnectConfig(ctx, l.db.pg.cfg)
		if err == nil {
			err = l.serve(ctx, conn, connected)
			connected = true
			backoff = 50 * time.Millisecond
			conn.Close(context.Background())
			l.mu.Lock()
			l.pid = 0
			l.mu.Unlock()
		}
		if ctx.Err() != nil {
			return
		}
		l.db.opt.Logger.Warn("store: the PostgreSQL LISTEN connection is lost; reconnecting", "dsn", l.db.path, "err", redactErr(err, l.db.opt.DSN))
		d := backoff/2 + rand.N(backoff/2+1)
		backoff = min(2*backoff, 5*time.Second)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return
		}
	}
}

// serve LISTENs on the subscribed channels of conn and delivers its
// notifications until the connection fails or ctx ends. reconnected says
// that an earlier connection served: every subscriber hears fn("") once
// its channel is listened again.
func (l *listener) serve(ctx context.Context, conn *pgx.Conn, reconnected bool) error {
	l.mu.Lock()
	l.pid = conn.PgConn().PID()
	for _, subs := range l.subs {
		for _, s := range subs {
			if s.active && reconnected {
				s.resync = true
			}
			s.active = false
		}
	}
	l.mu.Unlock()
	listening := map[string]bool{}
	for {
		// Bring the LISTENs in line with the subscriptions.
		l.mu.Lock()
		l.pending = false
		var add, drop []string
		for ch := range l.subs {
			if !listening[ch] {
				add = append(add, ch)
			}
		}
		for ch := range listening {
			if _, ok := l.subs[ch]; !ok {
				drop = append(drop, ch)
			}
		}
		l.mu.Unlock()
		for _, ch := range add {
			if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
				return err
			}
			listening[ch] = true
		}
		for _, ch := range drop {
			if _, err := conn.Exec(ctx, "UNLISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
				return err
			}
			delete(listening, ch)
		}
		var resync []*sub
		l.mu.Lock()
		for ch, subs := range l.subs {
			if !listening[ch] {
				continue
			}
			for _, s := range subs {
				if !s.active {
					s.active = true
					if !s.announced {
						s.announced = true
						close(s.ready)
					}
					if s.resync {
						s.resync = false
						resync = append(resync, s)
					}
				}
			}
		}
		l.mu.Unlock()
		for _, s := range resync {
			s.call("")
		}
		// Wait for a notification or a change of the subscriptions.
		l.mu.Lock()
		if l.pending {
			l.mu.Unlock()
			continue
		}
		wctx, wcancel := context.WithCancel(ctx)
		l.cancelWait = wcancel
		l.mu.Unlock()
		n, err := conn.WaitForNotification(wctx)
		l.mu.Lock()
		l.cancelWait = nil
		l.mu.Unlock()
		wcancel()
		if err != nil {
			if ctx.Err() != nil || conn.IsClosed() {
				return err
			}
			if wctx.Err() != nil {
				continue // woken: the subscriptions changed
			}
			return err
		}
		l.mu.Lock()
		subs := slices.Clone(l.subs[n.Channel])
		l.mu.Unlock()
		for _, s := range subs {
			if s.active {
				s.call(n.Payload)
			}
		}
	}
}
