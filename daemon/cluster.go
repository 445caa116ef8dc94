package daemon

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/cluster"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/store"
)

// The daemon's part in a cluster of daemons sharing one store
// (docs/protocol.md, "Cluster"): its lease, the takeover of sessions whose
// owner died, the self-fence, the hand-over at a graceful stop, and the
// wake-ups that reach the owner of a session from any daemon.

// joinCluster writes this daemon's lease (after its boot epoch) and
// prepares the bus. On SQLite the home lock proves that no other daemon
// runs on this state.db, so the leases of earlier daemons end now and the
// boot takes every session at once, exactly as before clusters existed.
func (d *Daemon) joinCluster(ctx context.Context) error {
	d.dialect = cluster.DialectOf(d.db)
	d.bus = cluster.NewBus(d.db)
	if d.dialect == cluster.SQLite && d.exclusive {
		if err := cluster.ExpireOthers(ctx, d.db, d.epoch); err != nil {
			return err
		}
	}
	opt := cluster.Options{TTL: time.Duration(d.cfg.Cluster.LeaseTTL) * time.Second, Label: d.cfg.Cluster.Label,
		OnLost: d.onLeaseLost, OnRenewed: d.onLeaseRenewed, OnBeat: d.onBeat, Logger: d.log}
	if d.exclusive {
		// Nobody can take this daemon's sessions (the home lock): a slow
		// or failing disk must not interrupt its turns; they retry their
		// writes as before.
		opt.OnLost, opt.OnRenewed = nil, nil
	}
	m, err := cluster.Join(ctx, d.db, d.epoch, opt)
	if err != nil {
		return err
	}
	d.member = m
	return nil
}

// startCluster listens for wake-ups and starts the heartbeats; called
// once the scheduler runs.
func (d *Daemon) startCluster() {
	d.wakeups = newWakeSet()
	d.wakeDone = make(chan struct{})
	d.stopListen = append(d.stopListen,
		d.bus.Listen(cluster.ChannelSessions, d.wakeups.add),
		d.bus.Listen(cluster.ChannelEvents, d.hub.remoteEvent))
	// A wake-up committed by another daemon between the boot's Recover and
	// the LISTEN above was not heard (Listen delivers what commits after it
	// returned): an input admitted there, or an unknown resolved there, in
	// a session this daemon took at boot would wait for a wake-up that
	// never comes. One resync from the tables closes that window (found by
	// the failover campaign: two inputs queued for minutes after a restart).
	d.wakeups.add("")
	go d.wakeLoop()
	if d.db.Driver() == store.Postgres {
		// Other daemons may have subscribers of this daemon's turns, and
		// this daemon of theirs: deltas travel on ChannelDeltas, in one
		// ordered stream with the announcements of this daemon's events
		// (deltas.go).
		origin := int64(d.member.ID())
		out := newDeltaOutbox(origin, d.bus.Send, d.log)
		d.hub.startDeltas(origin, out)
		d.stopListen = append(d.stopListen, d.bus.Listen(cluster.ChannelDeltas, d.hub.remoteDelta))
		d.hub.startCatchUp(d.db, out.announce)
	} else {
		d.hub.startCatchUp(d.db, func(sessionID string, seq int64) {
			d.bus.Publish(cluster.ChannelEvents, sessionID+":"+strconv.FormatInt(seq, 10))
		})
	}
	d.member.Start()
}

// stopCluster hands the sessions over (after the turns settled) and gives
// the lease up.
func (d *Daemon) stopCluster(ctx context.Context) {
	if d.member == nil {
		return
	}
	d.member.Halt() // no beat re-arms the expiry timer or takes sessions now
	for _, stop := range d.stopListen {
		stop()
	}
	if d.wakeups != nil {
		d.wakeups.close()
		<-d.wakeDone
	}
	d.hub.stopCatchUp()
	d.hub.stopDeltas()
	d.expiryMu.Lock()
	if d.expiry != nil {
		d.expiry.Stop()
	}
	d.expiryMu.Unlock()
	released, err := d.queue.Release(ctx)
	if err != nil {
		d.log.Error("hand the sessions over: they are taken when this daemon's lease expires", "err", err)
	} else if len(released) > 0 && d.db.Driver() == store.Postgres {
		d.log.Info("sessions handed over to the other daemons", "sessions", len(released))
	} else if len(released) > 0 {
		// SQLite has one daemon: its sessions wait for its next start.
		d.log.Debug("sessions released for the next start", "sessions", len(released))
	}
	if err := d.member.Stop(ctx); err != nil {
		d.log.Error("give the lease up", "err", err)
	}
	d.bus.Close()
}

// onLeaseLost is the self-fence: every turn stops and its commands are
// killed before another daemon may take the sessions.
func (d *Daemon) onLeaseLost() {
	d.sched.Fence()
}

func (d *Daemon) onLeaseRenewed() {
	d.sched.Unfence()
}

// onBeat runs after every renewal: it takes the sessions of dead daemons
// (all those with a started turn or an open prompt, so that their clients
// see the boot rules within the lease; those with queued work within the
// free capacity) and abandons the turns of sessions another daemon took.
func (d *Daemon) onBeat() {
	ctx, cancel := context.WithTimeout(d.ctx, d.member.TTL())
	defer cancel()
	d.checkRunningOwnership(ctx)
	d.takeOrphans(ctx)
	d.armExpiry(ctx)
}

// armExpiry sets a timer for the moment the first lease of another daemon
// that owns sessions runs out (asked of the database's clock), so that a
// dead daemon's sessions are taken within the lease of its death rather
// than at the next heartbeat after it. While the others live, each beat
// moves the timer on before it fires.
func (d *Daemon) armExpiry(ctx context.Context) {
	left, ok, err := d.queue.NextOwnerExpiry(ctx)
	if err != nil || !ok {
		return
	}
	wait := left + 20*time.Millisecond
	d.expiryMu.Lock()
	defer d.expiryMu.Unlock()
	if d.expiry != nil {
		d.expiry.Stop()
	}
	d.expiry = time.AfterFunc(wait, func() {
		if d.ctx.Err() != nil {
			return
		}
		ctx, cancel := context.WithTimeout(d.ctx, d.member.TTL())
		defer cancel()
		d.takeOrphans(ctx)
	})
}

func (d *Daemon) takeOrphans(ctx context.Context) {
	taken, err := d.queue.TakeOrphans(ctx, d.sched.FreeSlots())
	if err != nil {
		d.log.Warn("take the sessions of dead daemons", "err", err)
		return
	}
	d.afterTake(ctx, taken)
}

// afterTake logs each takeover for the operator, kills what the dead
// daemon left running on this host, and schedules the sessions.
func (d *Daemon) afterTake(ctx context.Context, taken []admission.Taken) {
	if len(taken) == 0 {
		return
	}
	unknown := 0
	for _, t := range taken {
		d.log.Warn("took over a session whose daemon is gone (boot rules applied: a started turn is now unknown, open prompts closed)",
			"audit", true, "session_id", t.SessionID, "from_daemon", t.From, "lease_epoch", t.LeaseEpoch, "unknown_admissions", len(t.Unknown))
		for _, a := range t.Unknown {
			unknown++
			d.log.Warn("admission left started by a daemon that is gone is now unknown; it holds its session's queue until an operator resolves it (prompt.resolve_unknown); a command it ran on another host cannot be killed from here",
				"audit", true, "session_id", a.SessionID, "admission_id", a.AdmissionID, "execution_generation", a.Generation(), "daemon", a.Daemon.V)
		}
		d.sched.Wake(t.SessionID)
	}
	if unknown > 0 {
		if err := d.killLeftoverTools(ctx); err != nil {
			d.log.Error("kill commands left running by a daemon that is gone", "err", err)
		}
	}
}

// checkRunningOwnership abandons every turn of this daemon whose session
// another daemon owns now (a split brain ended: this daemon was paused or
// cut off past its lease): its command is killed, and its writes were
// already refused by the fence.
func (d *Daemon) checkRunningOwnership(ctx context.Context) {
	for _, id := range d.sched.RunningSessions() {
		d.checkSession(ctx, id)
	}
}

// wakeLoop serves ChannelSessions: for each session named, the owner
// schedules it, reads answers given on other daemons, and honours a
// durable interrupt; a daemon that ran a turn of a session taken by
// another one abandons it; an unowned session is taken when there is
// capacity.
func (d *Daemon) wakeLoop() {
	defer close(d.wakeDone)
	for {
		ids, all, ok := d.wakeups.next()
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(d.ctx, 30*time.Second)
		if all {
			// Notifications may have been lost: look at everything.
			d.checkRunningOwnership(ctx)
			if err := d.prompts.Poll(ctx, ""); err != nil {
				d.log.Warn("read prompt answers", "err", err)
			}
			d.takeOrphans(ctx)
			d.wakeOwnedQueued(ctx)
		}
		for _, id := range ids {
			d.checkSession(ctx, id)
		}
		cancel()
	}
}

// wakeOwnedQueued schedules every session this daemon owns that has
// queued input: after a resync, an input admitted on another daemon while
// this daemon's LISTEN connection was down would otherwise wait until some
// other wake-up (nobody else may run it while this daemon lives).
func (d *Daemon) wakeOwnedQueued(ctx context.Context) {
	ids, err := d.queue.OwnedQueued(ctx)
	if err != nil {
		d.log.Warn("read the queued sessions this daemon owns", "err", err)
		return
	}
	for _, id := range ids {
		d.sched.Wake(id)
	}
}

// checkSession is what a wake-up of one session does on this daemon.
func (d *Daemon) checkSession(ctx context.Context, sessionID string) {
	s, err := d.queue.OwnerOf(ctx, sessionID)
	if err != nil {
		if errors.Is(err, admission.ErrSessionNotFound) {
			// Deleted (on another daemon): nothing more will be published.
			d.hub.dropSession(sessionID)
		} else {
			d.log.Warn("read a session's owner", "session_id", sessionID, "err", err)
		}
		return
	}
	mine := s.Daemon.Valid && s.Daemon.V == d.epoch
	if run, ok := d.sched.Running(sessionID); ok {
		switch {
		case !mine || (run.LeaseEpoch != 0 && run.LeaseEpoch != s.LeaseEpoch):
			if d.sched.Abandon(sessionID) {
				d.log.Error("another daemon took this session: its turn here stops and its command is killed; nothing more of it is written",
					"audit", true, "session_id", sessionID, "admission_id", run.AdmissionID, "owner_daemon", s.Daemon.V, "lease_epoch", s.LeaseEpoch)
			}
		case s.Interrupt.Valid && s.Interrupt.Int64 == run.Generation():
			go func() {
				ictx, cancel := context.WithTimeout(d.ctx, time.Minute)
				defer cancel()
				if _, _, err := d.sched.Interrupt(ictx, sessionID, run.Generation()); err != nil {
					d.log.Warn("interrupt requested on another daemon", "session_id", sessionID, "err", err)
				}
			}()
		}
	}
	if err := d.prompts.Poll(ctx, sessionID); err != nil {
		d.log.Warn("read prompt answers", "session_id", sessionID, "err", err)
	}
	if mine || d.sched.FreeSlots() > 0 {
		// A claim takes the session first when it has no live owner.
		d.sched.Wake(sessionID)
	}
}

// wakeSet coalesces session wake-ups for wakeLoop; "" asks for a full
// resync.
type wakeSet struct {
	mu     sync.Mutex
	ids    map[string]bool
	all    bool
	closed bool
	signal chan struct{}
}

func newWakeSet() *wakeSet {
	return &wakeSet{ids: map[string]bool{}, signal: make(chan struct{}, 1)}
}

// add never blocks (it runs on the notifying goroutine).
func (w *wakeSet) add(sessionID string) {
	w.mu.Lock()
	if sessionID == "" {
		w.all = true
	} else {
		w.ids[sessionID] = true
	}
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

func (w *wakeSet) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

func (w *wakeSet) next() (ids []string, all, ok bool) {
	for {
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			return nil, false, false
		}
		if len(w.ids) > 0 || w.all {
			for id := range w.ids {
				ids = append(ids, id)
			}
			all = w.all
			w.ids, w.all = map[string]bool{}, false
			w.mu.Unlock()
			return ids, all, true
		}
		w.mu.Unlock()
		<-w.signal
	}
}

// interruptElsewhere is session.interrupt for a turn that runs on another
// daemon: the request is durable (sessions.interrupt_generation, read by
// the owner when ChannelSessions wakes it, and by every answer's fence),
// and the call returns once the turn no longer runs (settled, or unknown
// after a takeover) or ctx ends. gen, when > 0, must be the running
// generation.
func (d *Daemon) interruptElsewhere(ctx context.Context, sessionID string, gen int64) (protocol.InterruptResult, error) {
	run, ok, err := admission.StartedIn(ctx, d.db, sessionID)
	if err != nil {
		return protocol.InterruptResult{}, err
	} else if !ok || run.Daemon.V == d.epoch {
		return protocol.InterruptResult{}, nil // nothing runs (or it just settled here)
	}
	if gen > 0 && gen != run.Generation() {
		return protocol.InterruptResult{}, protocol.Errorf(protocol.ReasonStaleGeneration, "execution_generation %d is not the live one (%d)", gen, run.Generation()).
			With("execution_generation", run.Generation())
	}
	if err := d.queue.RequestInterrupt(ctx, sessionID, run.Generation()); err != nil {
		return protocol.InterruptResult{}, err
	}
	d.log.Info("interrupt requested for a turn running on another daemon", "session_id", sessionID,
		"admission_id", run.AdmissionID, "execution_generation", run.Generation(), "daemon", run.Daemon.V)
	// The owner acts on its own; the row says when the turn stopped.
	wait := 20 * time.Millisecond
	for {
		st, err := d.queue.Get(ctx, sessionID, run.AdmissionID)
		if err != nil {
			return protocol.InterruptResult{}, err
		}
		switch {
		case st.Status == admission.StatusUnknown || st.Outcome.String == string(admission.OutcomeInterrupted):
			id := run.AdmissionID
			return protocol.InterruptResult{Interrupted: &id}, nil
		case st.Status == admission.StatusTerminal:
			return protocol.InterruptResult{}, nil // it ended on its own first
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return protocol.InterruptResult{}, ctx.Err()
		}
		wait = min(2*wait, 250*time.Millisecond)
	}
}
