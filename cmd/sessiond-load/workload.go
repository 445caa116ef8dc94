package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessiond/sessiond/fixtures/fakemodel"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
)

// runner runs one workload against one daemon, or several daemons sharing
// a store (clients are dealt round-robin over descs).
type runner struct {
	o        options
	descs    []descriptor
	st       *stats
	mem      *sampler
	cwd      string // session.create cwd: a temporary directory
	modelURL string
	pid      int
	runID    string // prefixes input ids
	logf     func(format string, a ...any)
	rep      *Report

	reconnects atomic.Int64
	snapReq    atomic.Int64
}

func (r *runner) run(ctx context.Context) error {
	var err error
	switch r.o.mode {
	case "mixed":
		err = r.mixed(ctx)
	case "idle":
		err = r.idle(ctx)
	case "resume":
		err = r.resumeMode(ctx)
	}
	r.rep.Reconnects = r.reconnects.Load()
	r.rep.SnapshotRequired = r.snapReq.Load()
	return err
}

// Method names in the report; a duplicate submit has its own row so that
// prompt.submit's latency is that of new admissions.
const (
	mSubmit    = protocol.MethodPromptSubmit
	mDuplicate = protocol.MethodPromptSubmit + " (duplicate)"
	mResume    = protocol.MethodSessionResume
	mCreate    = protocol.MethodSessionCreate
	mInfo      = protocol.MethodDaemonInfo
	mList      = protocol.MethodSessionList
	mConnect   = "connect"
)

// descFor is the daemon of client (or setup worker) i: round-robin over
// the daemons.
func (r *runner) descFor(i int) descriptor { return r.descs[i%len(r.descs)] }

func (r *runner) createParams() protocol.SessionCreateParams {
	return protocol.SessionCreateParams{Cwd: r.cwd, Model: fakemodel.ModelName, Provider: "custom", BaseURL: r.modelURL,
		Title: "sessiond-load", Source: "load"}
}

// callCtx bounds one call by --call-timeout.
func (r *runner) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.o.callTimeout)
}

// createSessions creates n sessions over --create-concurrency connections
// (one call in flight each) and returns their ids. The connections are
// closed afterwards, so their subscriptions do not outlive the setup.
func (r *runner) createSessions(ctx context.Context, n int) ([]string, error) {
	ids := make([]string, n)
	workers := min(r.o.createWorkers, n)
	var next, done atomic.Int64
	var mu sync.Mutex
	hist := newHist()
	var firstErr error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	stopProgress := r.progress(func() string {
		d := done.Load()
		return fmt.Sprintf("created %d/%d sessions (%.0f/s)", d, n, float64(d)/time.Since(start).Seconds())
	})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fail := func(err error) {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				cancel()
			}
			c, err := dial(ctx, r.descFor(w), 10*time.Second, nil)
			if err != nil {
				fail(fmt.Errorf("connect: %w", err))
				return
			}
			defer c.Close()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				var snap struct {
					SessionID string `json:"session_id"`
				}
				t0 := time.Now()
				cctx, ccancel := r.callCtx(ctx)
				err := c.Call(cctx, protocol.MethodSessionCreate, r.createParams(), &snap)
				ccancel()
				if err != nil {
					fail(fmt.Errorf("session.create: %w", err))
					return
				}
				mu.Lock()
				record(hist, time.Since(t0))
				mu.Unlock()
				ids[i] = snap.SessionID
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	stopProgress()
	elapsed := time.Since(start)
	r.rep.Setup.SessionsCreated = int(done.Load())
	r.rep.Setup.CreateS = elapsed.Seconds()
	r.rep.Setup.CreatePerS = float64(done.Load()) / elapsed.Seconds()
	r.rep.Setup.CreateLatency = latencyOf(hist)
	if firstErr != nil {
		return nil, fmt.Errorf("setup: creating %d sessions: %w", n, firstErr)
	}
	r.logf("created %d sessions in %.1fs", n, elapsed.Seconds())
	return ids, nil
}

// forEach runs f(i) for i in [0, n) on workers goroutines.
func forEach(n, workers int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i)
			}
		}()
	}
	wg.Wait()
}

// progress prints line() every --progress on stderr until the returned
// function is called.
func (r *runner) progress(line func() string) (stop func()) {
	if r.o.quiet || r.o.progressPeriod <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(r.o.progressPeriod)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				r.logf("%s", line())
			case <-done:
				return
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// pace calls op(due) for every due time of one client in [start, end): open
// loop at --rate (each op on its own goroutine, tracked by wg, so a slow
// answer never delays the next operation), or closed loop when --rate is 0.
func (r *runner) pace(ctx context.Context, start, end time.Time, wg *sync.WaitGroup, op func(due time.Time)) {
	if d := time.Until(start); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
	if r.o.rate == 0 {
		for ctx.Err() == nil && time.Now().Before(end) {
			op(time.Now())
		}
		return
	}
	interval := float64(time.Second) / r.o.rate
	// A random phase spreads the clients over the first interval.
	next := start.Add(time.Duration(rand.Float64() * interval))
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for next.Before(end) {
		if d := time.Until(next); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
		} else if ctx.Err() != nil {
			return
		}
		due := next
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.st.late(time.Since(due))
			op(due)
		}()
		next = next.Add(time.Duration(interval * (1 + r.o.jitter*(2*rand.Float64()-1))))
	}
}

// window runs loop for every client from a common start for --duration and
// waits for the operations in flight; it returns the window's length.
func (r *runner) window(ctx context.Context, n int, loop func(i int, start, end time.Time, wg *sync.WaitGroup)) time.Duration {
	start := time.Now().Add(50 * time.Millisecond)
	end := start.Add(r.o.duration)
	stop := r.progress(func() string {
		ok, errs := r.st.totals()
		sub, ended := r.st.turnCounts()
		el := time.Since(start).Seconds()
		return fmt.Sprintf("t=%.0fs ok %d (%.0f/s), errors %d, turns ended %d/%d", el, ok, float64(ok)/el, errs, ended, sub)
	})
	defer stop()
	cpu := r.cpuMeter()
	var loops, ops sync.WaitGroup
	for i := range n {
		loops.Add(1)
		go func() {
			defer loops.Done()
			loop(i, start, end, &ops)
		}()
	}
	loops.Wait()
	elapsed := min(time.Since(start), r.o.duration)
	ops.Wait()
	cpu()
	return elapsed
}

// cpuMeter reads the daemon's and this process's CPU time now; the
// returned function reads them again and fills r.rep.CPU with the
// difference.
func (r *runner) cpuMeter() (done func()) {
	t0 := time.Now()
	d0, derr := cpuTime(r.pid)
	c0, _ := cpuTime(0)
	return func() {
		d1, derr1 := cpuTime(r.pid)
		c1, _ := cpuTime(0)
		if err := errors.Join(derr, derr1); err != nil {
			r.rep.CPU.Err = err.Error()
			return
		}
		secs := time.Since(t0).Seconds()
		r.rep.CPU.DaemonS, r.rep.CPU.ClientS = d1-d0, c1-c0
		r.rep.CPU.DaemonCores, r.rep.CPU.ClientCores = (d1-d0)/secs, (c1-c0)/secs
		if ok, _ := r.st.totals(); ok > 0 && r.o.mode != "idle" {
			r.rep.CPU.DaemonPerOp = 1000 * (d1 - d0) / float64(ok)
		}
	}
}

// ignorable reports whether err only says that the run was interrupted.
func ignorable(ctx context.Context, err error) bool {
	return ctx.Err() != nil && errors.Is(err, context.Canceled)
}

// --- mixed ------------------------------------------------------------------

// client is one connection of the mixed workload and the sessions it works on.
type client struct {
	r  *runner
	id int

	dialMu sync.Mutex // one (re)connect at a time

	mu       sync.Mutex
	conn     *rpc.Client
	sessions []*sess
	byID     map[string]*sess
	pending  map[string]time.Time // admission id → due time of its submit
	early    map[string]turnEnd   // turn.completed seen before the submit's answer
	inputs   int
}

type sess struct {
	id        string
	lastSeq   int64  // last durable event seq seen
	lastInput string // last acknowledged new input, for duplicate submits
	lastText  string
}

type turnEnd struct{ outcome, err string }

func (c *client) addSession(id string) *sess {
	s := &sess{id: id}
	c.sessions = append(c.sessions, s)
	c.byID[id] = s
	return s
}

// onNote handles a notification on the connection's reading goroutine.
func (c *client) onNote(n rpc.Notification) {
	if n.Method != protocol.NotifySessionEvent {
		return
	}
	var ev protocol.Event
	if json.Unmarshal(n.Params, &ev) == nil {
		c.onEvent(ev)
	}
}

// onEvent tracks the last seq per session and ends this client's turns.
func (c *client) onEvent(ev protocol.Event) {
	c.mu.Lock()
	if s := c.byID[ev.SessionID]; s != nil && ev.Seq != nil && *ev.Seq > s.lastSeq {
		s.lastSeq = *ev.Seq
	}
	var p protocol.TurnCompletedPayload
	if ev.Type == protocol.EventTurnCompleted {
		if pl, err := ev.Decode(); err == nil {
			p, _ = pl.(protocol.TurnCompletedPayload)
		}
	}
	if ev.Type != protocol.EventTurnCompleted || ev.AdmissionID == "" {
		c.mu.Unlock()
		return
	}
	due, ok := c.pending[ev.AdmissionID]
	if ok {
		delete(c.pending, ev.AdmissionID)
		c.mu.Unlock()
		c.r.st.turnEnded(string(p.Outcome), p.Error, due)
		return
	}
	// Another client's turn on a shared session, a replay, or (rarely) a
	// turn that ended before its submit was answered.
	if len(c.early) > 10000 {
		clear(c.early)
	}
	c.early[ev.AdmissionID] = turnEnd{string(p.Outcome), p.Error}
	c.mu.Unlock()
}

// connection returns the open connection, reconnecting (and re-subscribing
// every session with after_seq) when it was lost.
func (c *client) connection(ctx context.Context) (*rpc.Client, error) {
	c.mu.Lock()
	conn := c.conn
	c.mu.Unlock()
	if conn != nil && conn.Err() == nil {
		return conn, nil
	}
	c.dialMu.Lock()
	defer c.dialMu.Unlock()
	c.mu.Lock()
	conn = c.conn
	c.mu.Unlock()
	if conn != nil && conn.Err() == nil {
		return conn, nil
	}
	first := conn == nil
	if conn != nil {
		conn.Close()
	}
	conn, err := dial(ctx, c.r.descFor(c.id), 10*time.Second, c.onNote)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.conn = conn
	sessions := append([]*sess(nil), c.sessions...)
	c.mu.Unlock()
	if !first {
		c.r.reconnects.Add(1)
	}
	for _, s := range sessions {
		cctx, cancel := c.r.callCtx(ctx)
		_, err := c.resume(cctx, conn, s)
		cancel()
		if err != nil {
			return conn, fmt.Errorf("subscribing to %s: %w", s.id, err)
		}
	}
	return conn, nil
}

// resume calls session.resume with after_seq and handles the events it
// returns.
func (c *client) resume(ctx context.Context, conn *rpc.Client, s *sess) (snapshotRequired bool, err error) {
	c.mu.Lock()
	after := s.lastSeq
	c.mu.Unlock()
	var snap struct {
		LastSeq          int64            `json:"last_seq"`
		SnapshotRequired bool             `json:"snapshot_required"`
		Events           []protocol.Event `json:"events"`
	}
	if err := conn.Call(ctx, protocol.MethodSessionResume, protocol.ResumeParams{SessionID: s.id, AfterSeq: &after}, &snap); err != nil {
		return false, err
	}
	for _, ev := range snap.Events {
		c.onEvent(ev)
	}
	c.mu.Lock()
	s.lastSeq = max(s.lastSeq, snap.LastSeq)
	c.mu.Unlock()
	return snap.SnapshotRequired, nil
}

func (c *client) pick() string {
	total := 0
	for _, e := range c.r.o.mix {
		total += e.weight
	}
	n := rand.IntN(total)
	for _, e := range c.r.o.mix {
		if n < e.weight {
			return e.op
		}
		n -= e.weight
	}
	return c.r.o.mix[0].op
}

// do runs one operation that was due at due.
func (c *client) do(ctx context.Context, op string, due time.Time) {
	st := c.r.st
	conn, err := c.connection(ctx)
	if err != nil {
		if !ignorable(ctx, err) {
			st.op(mConnect, due, due, err)
		}
		return
	}
	cctx, cancel := c.r.callCtx(ctx)
	defer cancel()
	c.mu.Lock()
	s := c.sessions[rand.IntN(len(c.sessions))]
	c.mu.Unlock()
	switch op {
	case "duplicate":
		c.mu.Lock()
		var input, text string
		for range 4 { // a session with an acknowledged input, else a new submit
			if s.lastInput != "" {
				input, text = s.lastInput, s.lastText
				break
			}
			s = c.sessions[rand.IntN(len(c.sessions))]
		}
		c.mu.Unlock()
		if input == "" {
			c.submit(ctx, cctx, conn, s, due)
			return
		}
		var rec protocol.Receipt
		sent := time.Now()
		err := conn.Call(cctx, protocol.MethodPromptSubmit, protocol.SubmitParams{SessionID: s.id, InputID: input, Text: text}, &rec)
		if ignorable(ctx, err) {
			return
		}
		st.op(mDuplicate, due, sent, err)
		if err == nil && !rec.Duplicate {
			st.check(mDuplicate, "answered duplicate:false")
		}
	case "submit":
		c.submit(ctx, cctx, conn, s, due)
	case "resume":
		sent := time.Now()
		required, err := c.resume(cctx, conn, s)
		if ignorable(ctx, err) {
			return
		}
		st.op(mResume, due, sent, err)
		if required {
			c.r.snapReq.Add(1)
		}
	case "create":
		var snap struct {
			SessionID string `json:"session_id"`
		}
		sent := time.Now()
		err := conn.Call(cctx, protocol.MethodSessionCreate, c.r.createParams(), &snap)
		if ignorable(ctx, err) {
			return
		}
		st.op(mCreate, due, sent, err)
		if err == nil {
			c.mu.Lock()
			c.addSession(snap.SessionID)
			c.mu.Unlock()
		}
	case "info":
		sent := time.Now()
		err := conn.Call(cctx, protocol.MethodDaemonInfo, nil, nil)
		if !ignorable(ctx, err) {
			st.op(mInfo, due, sent, err)
		}
	case "list":
		sent := time.Now()
		err := conn.Call(cctx, protocol.MethodSessionList, protocol.SessionListParams{Limit: 50}, nil)
		if !ignorable(ctx, err) {
			st.op(mList, due, sent, err)
		}
	}
}

// submit sends a new input to s; a share --tools of them ask for a tool call.
func (c *client) submit(ctx, cctx context.Context, conn *rpc.Client, s *sess, due time.Time) {
	c.mu.Lock()
	c.inputs++
	input := fmt.Sprintf("%s-c%d-%d", c.r.runID, c.id, c.inputs)
	c.mu.Unlock()
	text := "load input " + input
	if rand.Float64() < c.r.o.tools {
		text = toolPrefix + text
	}
	var rec protocol.Receipt
	sent := time.Now()
	err := conn.Call(cctx, protocol.MethodPromptSubmit, protocol.SubmitParams{SessionID: s.id, InputID: input, Text: text}, &rec)
	if ignorable(ctx, err) {
		return
	}
	c.r.st.op(mSubmit, due, sent, err)
	if err != nil {
		return
	}
	if rec.Duplicate {
		c.r.st.check(mSubmit, "new input answered duplicate:true")
		return
	}
	c.r.st.submitted()
	c.mu.Lock()
	s.lastInput, s.lastText = input, text
	if e, ok := c.early[rec.AdmissionID]; ok {
		delete(c.early, rec.AdmissionID)
		c.mu.Unlock()
		c.r.st.turnEnded(e.outcome, e.err, due)
		return
	}
	c.pending[rec.AdmissionID] = due
	c.mu.Unlock()
}

func (r *runner) mixed(ctx context.Context) error {
	ids, err := r.createSessions(ctx, r.o.sessions)
	if err != nil {
		return err
	}
	n := r.o.clients
	clients := make([]*client, n)
	for i := range clients {
		clients[i] = &client{r: r, id: i, byID: map[string]*sess{}, pending: map[string]time.Time{}, early: map[string]turnEnd{}}
	}
	// Deal the sessions out; with fewer sessions than clients, several
	// clients share one (like several terminals attached to one session).
	if len(ids) >= n {
		for j, id := range ids {
			clients[j%n].addSession(id)
		}
	} else {
		for i, c := range clients {
			c.addSession(ids[i%len(ids)])
		}
	}
	t0 := time.Now()
	var connErr atomic.Pointer[error]
	forEach(n, r.o.dialWorkers, func(i int) {
		if connErr.Load() != nil {
			return
		}
		if _, err := clients[i].connection(ctx); err != nil {
			connErr.CompareAndSwap(nil, &err)
		}
	})
	r.rep.Setup.Connections, r.rep.Setup.ConnectS = n, time.Since(t0).Seconds()
	defer func() {
		forEach(n, r.o.dialWorkers, func(i int) {
			if c := clients[i].conn; c != nil {
				c.Close()
			}
		})
	}()
	if p := connErr.Load(); p != nil {
		return fmt.Errorf("setup: connecting %d clients: %w", n, *p)
	}
	r.logf("%d clients connected and subscribed in %.1fs; running %s", n, time.Since(t0).Seconds(), r.o.duration)

	elapsed := r.window(ctx, n, func(i int, start, end time.Time, wg *sync.WaitGroup) {
		c := clients[i]
		r.pace(ctx, start, end, wg, func(due time.Time) { c.do(ctx, c.pick(), due) })
	})
	r.rep.ElapsedS = elapsed.Seconds()

	// Let the submitted turns finish (their latency is recorded as they end).
	deadline := time.Now().Add(r.o.drain)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		sub, ended := r.st.turnCounts()
		if ended >= sub {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.st.fill(r.rep, elapsed)
	return nil
}

// --- idle -------------------------------------------------------------------

func (r *runner) idle(ctx context.Context) error {
	var ids []string
	if r.o.sessions > 0 {
		var err error
		if ids, err = r.createSessions(ctx, r.o.sessions); err != nil {
			return err
		}
	}
	n := r.o.clients
	base, clientBase := r.mem.now(), r.mem.nowClient()
	conns := make([]*rpc.Client, n)
	var opened atomic.Int64
	t0 := time.Now()
	stopProgress := r.progress(func() string { return fmt.Sprintf("%d/%d connections open", opened.Load(), n) })
	forEach(n, r.o.dialWorkers, func(i int) {
		if ctx.Err() != nil {
			return
		}
		due := time.Now()
		c, err := dial(ctx, r.descFor(i), r.o.callTimeout, nil)
		r.st.op(mConnect, due, due, err)
		if err != nil {
			return
		}
		cctx, cancel := r.callCtx(ctx)
		defer cancel()
		due = time.Now()
		if len(ids) > 0 {
			err = c.Call(cctx, protocol.MethodSessionResume, protocol.ResumeParams{SessionID: ids[i%len(ids)]}, nil)
			r.st.op(mResume, due, due, err)
		} else {
			err = c.Call(cctx, protocol.MethodDaemonInfo, nil, nil)
			r.st.op(mInfo, due, due, err)
		}
		if err != nil {
			c.Close()
			return
		}
		conns[i] = c
		opened.Add(1)
	})
	stopProgress()
	connectS := time.Since(t0).Seconds()
	r.rep.Setup.Connections, r.rep.Setup.ConnectS = int(opened.Load()), connectS
	defer forEach(n, r.o.dialWorkers, func(i int) {
		if conns[i] != nil {
			conns[i].Close()
		}
	})
	connected := r.mem.now()
	r.logf("%d connections open in %.1fs (daemon RSS %s); holding them idle for %s", opened.Load(), connectS, mib(connected.RSSBytes), r.o.duration)
	cpu := r.cpuMeter()
	hold := time.NewTimer(r.o.duration)
	select {
	case <-hold.C:
	case <-ctx.Done():
		hold.Stop()
	}
	cpu()
	steady, clientSteady := r.mem.now(), r.mem.nowClient()

	// Every connection must still be open and authenticated.
	var alive atomic.Int64
	forEach(n, r.o.dialWorkers, func(i int) {
		c := conns[i]
		if c == nil || ctx.Err() != nil {
			return
		}
		cctx, cancel := r.callCtx(ctx)
		defer cancel()
		due := time.Now()
		err := c.Call(cctx, protocol.MethodDaemonInfo, nil, nil)
		r.st.op(mInfo+" (after the hold)", due, due, err)
		if err == nil {
			alive.Add(1)
		}
	})
	open := int(opened.Load())
	ir := &IdleReport{Open: open, Failed: n - open, AliveAtEnd: int(alive.Load()), BaselineRSSBytes: base.RSSBytes,
		ConnectedRSSBytes: connected.RSSBytes, SteadyRSSBytes: steady.RSSBytes}
	if open > 0 {
		ir.PerConnBytes = (steady.RSSBytes - base.RSSBytes) / int64(open)
		ir.ClientPerConn = (clientSteady.RSSBytes - clientBase.RSSBytes) / int64(open)
	}
	r.rep.Idle = ir
	r.rep.ElapsedS = r.o.duration.Seconds()
	r.st.fill(r.rep, r.o.duration) // failed connects and calls count there
	return nil
}

// --- resume -----------------------------------------------------------------

func (r *runner) resumeMode(ctx context.Context) error {
	ids, err := r.createSessions(ctx, r.o.sessions)
	if err != nil {
		return err
	}
	n := r.o.clients
	conns := make([]*rpc.Client, n)
	t0 := time.Now()
	var connErr atomic.Pointer[error]
	forEach(n, r.o.dialWorkers, func(i int) {
		c, err := dial(ctx, r.descFor(i), 10*time.Second, nil)
		if err != nil {
			connErr.CompareAndSwap(nil, &err)
			return
		}
		conns[i] = c
	})
	r.rep.Setup.Connections, r.rep.Setup.ConnectS = n, time.Since(t0).Seconds()
	defer forEach(n, r.o.dialWorkers, func(i int) {
		if conns[i] != nil {
			conns[i].Close()
		}
	})
	if p := connErr.Load(); p != nil {
		return fmt.Errorf("setup: connecting %d clients: %w", n, *p)
	}
	r.logf("%d clients resuming random sessions of %d for %s", n, len(ids), r.o.duration)
	elapsed := r.window(ctx, n, func(i int, start, end time.Time, wg *sync.WaitGroup) {
		c := conns[i]
		r.pace(ctx, start, end, wg, func(due time.Time) {
			cctx, cancel := r.callCtx(ctx)
			defer cancel()
			var snap struct {
				LastSeq int64 `json:"last_seq"`
			}
			sent := time.Now()
			err := c.Call(cctx, protocol.MethodSessionResume, protocol.ResumeParams{SessionID: ids[rand.IntN(len(ids))]}, &snap)
			if !ignorable(ctx, err) {
				r.st.op(mResume, due, sent, err)
			}
		})
	})
	r.rep.ElapsedS = elapsed.Seconds()
	r.st.fill(r.rep, elapsed)
	return nil
}
