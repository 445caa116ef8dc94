package tools

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/sessiond/sessiond/sandbox"
)

// DefaultPrestartIdle is how long a pre-started sandbox helper waits for
// its command before it is discarded.
const DefaultPrestartIdle = 30 * time.Second

// DefaultPrestartMax bounds the pre-started helpers waiting at once (one
// per distinct sandbox spec and cwd).
const DefaultPrestartMax = 8

// Prestarts keeps at most one pre-started sandbox helper
// (sandbox.Prestarted) per distinct sandbox spec and cwd, so that the
// exec of the helper, its process group and its PID and IPC namespaces
// are off the next command's path. RunTerminal takes the one waiting for
// its spec (else it starts the helper cold, as without Prestarts) and,
// once its command ended, pre-starts the next. A helper runs one command: everything the
// command sees — its Spec with a fresh temp directory and the registered
// homes read at dispatch, its environment, its mount namespace and view —
// is made after RunTerminal dispatched it, exactly as for a cold helper.
// Helpers not taken within Idle are discarded, and Close discards all;
// they die with the daemon (Pdeathsig). The zero value is not usable: see
// NewPrestarts.
type Prestarts struct {
	idle time.Duration
	max  int

	mu       sync.Mutex
	closed   bool
	waiting  map[string]*waitingHelper
	starting map[string]bool
	wg       sync.WaitGroup // pre-starts in flight and idle timers
}

type waitingHelper struct {
	p     *sandbox.Prestarted
	timer *time.Timer
}

// NewPrestarts returns an empty set of pre-started helpers that discards
// one after idle (DefaultPrestartIdle when ≤ 0) and keeps at most max
// waiting (DefaultPrestartMax when ≤ 0).
func NewPrestarts(idle time.Duration, max int) *Prestarts {
	if idle <= 0 {
		idle = DefaultPrestartIdle
	}
	if max <= 0 {
		max = DefaultPrestartMax
	}
	return &Prestarts{idle: idle, max: max, waiting: map[string]*waitingHelper{}, starting: map[string]bool{}}
}

// prestartKey names the helpers interchangeable for spec (before its
// per-command fields are filled) run in cwd.
func prestartKey(spec *sandbox.Spec, cwd string) string {
	js, _ := json.Marshal(struct {
		Spec sandbox.Spec
		Cwd  string
	}{*spec, cwd})
	return string(js)
}

// take returns the helper waiting for key, if one is and it still waits
// (a crashed or killed one is discarded), and removes it from the set.
func (ps *Prestarts) take(key string) *sandbox.Prestarted {
	ps.mu.Lock()
	w := ps.waiting[key]
	delete(ps.waiting, key)
	ps.mu.Unlock()
	if w == nil {
		return nil
	}
	if w.timer.Stop() {
		ps.wg.Done()
	}
	if !w.p.Waiting() {
		w.p.Discard()
		return nil
	}
	return w.p
}

// prestart starts, in the background, a helper for key unless one waits
// or is being started for it, the set is full or closed.
func (ps *Prestarts) prestart(key, cwd string) {
	ps.mu.Lock()
	if ps.closed || ps.waiting[key] != nil || ps.starting[key] || len(ps.waiting)+len(ps.starting) >= ps.max {
		ps.mu.Unlock()
		return
	}
	ps.starting[key] = true
	ps.wg.Add(1)
	ps.mu.Unlock()
	go func() {
		defer ps.wg.Done()
		p, err := sandbox.Prestart(cwd)
		ps.mu.Lock()
		delete(ps.starting, key)
		if err != nil || ps.closed {
			ps.mu.Unlock()
			if p != nil {
				p.Discard()
			}
			return // the next command starts cold, and reports any error
		}
		w := &waitingHelper{p: p}
		ps.wg.Add(1)
		w.timer = time.AfterFunc(ps.idle, func() {
			defer ps.wg.Done()
			ps.mu.Lock()
			mine := ps.waiting[key] == w
			if mine {
				delete(ps.waiting, key)
			}
			ps.mu.Unlock()
			if mine {
				w.p.Discard()
			}
		})
		ps.waiting[key] = w
		ps.mu.Unlock()
	}()
}

// Waiting returns how many pre-started helpers wait for a command.
func (ps *Prestarts) Waiting() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.waiting)
}

// Close discards every waiting helper and waits for pre-starts in flight
// to end (each is discarded); later pre-starts do nothing. Commands
// already dispatched are RunTerminal's. Safe to call more than once, and
// on nil.
func (ps *Prestarts) Close() {
	if ps == nil {
		return
	}
	ps.mu.Lock()
	ps.closed = true
	ws := ps.waiting
	ps.waiting = map[string]*waitingHelper{}
	ps.mu.Unlock()
	for _, w := range ws {
		if w.timer.Stop() {
			ps.wg.Done()
		}
		w.p.Discard()
	}
	ps.wg.Wait()
}
