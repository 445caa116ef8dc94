package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sessiond/sessiond/store"
)

// DefaultLeaseTTL is cluster.lease_ttl's default.
const DefaultLeaseTTL = 10 * time.Second

// Options configure a Member.
type Options struct {
	// TTL is the lease: another daemon may take this daemon's sessions
	// once TTL passed on the database's clock since its last renewal.
	// Default DefaultLeaseTTL. Heartbeats run every TTL/3.
	TTL time.Duration
	// Label is cluster.label, stored with the lease.
	Label string
	// OnLost is called (from the heartbeat goroutine) when the lease could
	// not be renewed for FenceAfter: the daemon must stop its turns and
	// kill their commands before anybody else may take its sessions.
	OnLost func()
	// OnRenewed is called after a renewal that follows OnLost.
	OnRenewed func()
	// OnBeat is called after every successful renewal while the lease
	// holds (e.g. to take sessions of dead daemons).
	OnBeat func()
	// Now is the monotonic clock of the self-fence; default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Member is one daemon's membership: its id (boot_epochs.epoch) and lease.
type Member struct {
	db  *store.DB
	id  DaemonID
	d   Dialect
	opt Options

	mu        sync.Mutex
	renewedAt time.Time // when the last successful renewal was sent
	lost      bool

	stop chan struct{}
	done chan struct{}
	kick chan struct{} // a renewal succeeded (fenceLoop)
}

// FenceAfter is how long after the last successful renewal was sent the
// daemon fences itself: 3/4 of the TTL, so that it has stopped its turns
// before the lease can have expired on the database's clock (the renewal
// was written after it was sent), with two missed heartbeats allowed.
func (m *Member) FenceAfter() time.Duration { return m.opt.TTL * 3 / 4 }

// Join writes the lease of daemon id (its boot_epochs row must exist) and
// returns its Member; Start runs the heartbeats.
func Join(ctx context.Context, db *store.DB, id DaemonID, opt Options) (*Member, error) {
	if opt.TTL <= 0 {
		opt.TTL = DefaultLeaseTTL
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	m := &Member{db: db, id: id, d: DialectOf(db), opt: opt, kick: make(chan struct{}, 1)}
	if err := db.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("lease.join")
		_, err := tx.Exec(`UPDATE boot_epochs SET label = ? WHERE epoch = ?`, opt.Label, id)
		return err
	}); err != nil {
		return nil, fmt.Errorf("join the cluster: %w", err)
	}
	if err := m.Renew(ctx); err != nil {
		return nil, fmt.Errorf("join the cluster: %w", err)
	}
	return m, nil
}

// ID is the daemon's id (its boot epoch).
func (m *Member) ID() DaemonID { return m.id }

// TTL is the lease's length.
func (m *Member) TTL() time.Duration { return m.opt.TTL }

// Dialect is the store's dialect.
func (m *Member) Dialect() Dialect { return m.d }

// Renew writes lease_expires_ms = the database's now + TTL. It is
// unconditional: a daemon whose lease lapsed without anybody taking its
// sessions keeps them (every write of its turns is fenced by the
// session's lease_epoch, which a takeover bumps).
func (m *Member) Renew(ctx context.Context) error {
	sent := m.opt.Now()
	// On a connection of its own, outside SERIALIZABLE: the claims that
	// read leases and a busy pool must not delay (or abort) a renewal.
	res, err := m.db.ExecReserved(ctx, `UPDATE boot_epochs SET lease_expires_ms = `+m.d.NowMS()+` + ? WHERE epoch = ?`,
		m.opt.TTL.Milliseconds(), m.id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("boot epoch %d is not in boot_epochs", m.id)
	}
	m.mu.Lock()
	if sent.After(m.renewedAt) {
		m.renewedAt = sent
	}
	m.mu.Unlock()
	select {
	case m.kick <- struct{}{}:
	default:
	}
	return nil
}

// Valid reports whether the lease is held as far as this daemon knows (its
// last renewal was sent less than FenceAfter ago and it has not fenced
// itself since).
func (m *Member) Valid() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.lost && m.opt.Now().Sub(m.renewedAt) < m.FenceAfter()
}

// Start runs the heartbeats every TTL/3 until Stop.
func (m *Member) Start() {
	m.stop, m.done = make(chan struct{}), make(chan struct{})
	go m.loop()
}

func (m *Member) loop() {
	defer close(m.done)
	// The self-fence deadline has its own goroutine, so that a heartbeat
	// stuck in a slow or unreachable store (Renew, OnBeat) cannot delay it.
	fenceDone := make(chan struct{})
	go func() {
		defer close(fenceDone)
		m.fenceLoop()
	}()
	defer func() { <-fenceDone }()
	period := m.opt.TTL / 3
	tick := time.NewTicker(period)
	defer tick.Stop()
	// OnBeat (taking orphans, checking running turns) may take longer
	// than a period on a busy store: it runs beside the renewals, one at a
	// time, and a beat that finds it still running skips it.
	var onBeat sync.WaitGroup
	busy := make(chan struct{}, 1)
	defer onBeat.Wait()
	for {
		select {
		case <-m.stop:
			return
		case <-tick.C:
			if !m.renewBeat() || m.opt.OnBeat == nil {
				continue
			}
			select {
			case busy <- struct{}{}:
				onBeat.Add(1)
				go func() {
					defer onBeat.Done()
					defer func() { <-busy }()
					m.opt.OnBeat()
				}()
			default:
			}
		}
	}
}

// fenceLoop calls Check when FenceAfter has passed since the last
// renewal; once fenced it looks again at each renewal (Renew kicks it) or
// every TTL/3.
func (m *Member) fenceLoop() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		m.mu.Lock()
		wait := m.FenceAfter() - m.opt.Now().Sub(m.renewedAt)
		if m.lost {
			wait = m.opt.TTL / 3
		}
		m.mu.Unlock()
		t.Reset(max(wait, time.Millisecond))
		select {
		case <-m.stop:
			return
		case <-m.kick:
			t.Stop()
		case <-t.C:
			m.Check()
		}
	}
}

// Check fences the daemon (OnLost, once) when its last renewal was sent
// FenceAfter ago or more. It reports whether the lease is held.
func (m *Member) Check() bool {
	m.mu.Lock()
	expired := m.opt.Now().Sub(m.renewedAt) >= m.FenceAfter()
	fire := expired && !m.lost
	if fire {
		m.lost = true
	}
	lost := m.lost
	m.mu.Unlock()
	switch {
	case fire && m.opt.OnLost != nil:
		m.opt.Logger.Error("the lease could not be renewed in time: stopping every turn of this daemon and killing their commands (self-fencing) before another daemon may take its sessions",
			"daemon", m.id, "lease_ttl", m.opt.TTL)
		m.opt.OnLost()
	case fire:
		m.opt.Logger.Warn("the lease could not be renewed in time", "daemon", m.id, "lease_ttl", m.opt.TTL)
	}
	return !lost
}

// Beat is one heartbeat: check the self-fence, renew, and call OnRenewed
// and then OnBeat (after a renewal).
func (m *Member) Beat() {
	if m.renewBeat() && m.opt.OnBeat != nil {
		m.opt.OnBeat()
	}
}

// renewBeat is Beat without OnBeat: it reports whether the lease was
// renewed.
func (m *Member) renewBeat() bool {
	m.Check()
	ctx, cancel := context.WithTimeout(context.Background(), m.opt.TTL/3)
	err := m.Renew(ctx)
	cancel()
	if err != nil {
		m.opt.Logger.Warn("lease renewal failed", "daemon", m.id, "err", err)
		m.Check()
		return false
	}
	m.mu.Lock()
	regained := m.lost
	m.lost = false
	m.mu.Unlock()
	select {
	case m.kick <- struct{}{}:
	default:
	}
	if regained {
		m.opt.Logger.Warn("lease renewed after self-fencing: this daemon serves again", "daemon", m.id)
		if m.opt.OnRenewed != nil {
			m.opt.OnRenewed()
		}
	}
	return true
}

// Halt ends the heartbeats (and the self-fence timer) without giving the
// lease up: the daemon looks paused or cut off to the others, whose
// takeover starts when the lease expires. For tests and fault drills.
func (m *Member) Halt() {
	if m.stop != nil {
		close(m.stop)
		<-m.done
		m.stop = nil
	}
}

// Stop ends the heartbeats and gives the lease up (lease_expires_ms NULL):
// whatever this daemon still owns may be taken at once.
func (m *Member) Stop(ctx context.Context) error {
	m.Halt()
	err := m.db.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("lease.stop")
		_, err := tx.Exec(`UPDATE boot_epochs SET lease_expires_ms = NULL WHERE epoch = ?`, m.id)
		return err
	})
	if errors.Is(err, store.ErrClosed) {
		return nil
	}
	return err
}

// ExpireOthers ends the lease of every daemon but id. Only a daemon that
// knows that no other one runs may call it: on SQLite the home lock proves
// it (state.db lives in the locked home), so a restart takes every session
// at once instead of waiting for the dead daemon's lease to run out.
func ExpireOthers(ctx context.Context, db *store.DB, id DaemonID) error {
	return db.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("lease.expire_others")
		_, err := tx.Exec(`UPDATE boot_epochs SET lease_expires_ms = NULL WHERE epoch <> ? AND lease_expires_ms IS NOT NULL`, id)
		return err
	})
}

// Register records the start of a daemon (its boot_epochs row, as
// PROTOCOL.md's descriptor reports it) and returns its id, the new boot
// epoch.
func Register(ctx context.Context, db *store.DB, pid int, version, startedAt string) (DaemonID, error) {
	var id DaemonID
	err := db.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("boot.register")
		return tx.Get(&id, `INSERT INTO boot_epochs (pid, version, started_at) VALUES (?, ?, ?) RETURNING epoch`,
			pid, version, startedAt)
	})
	return id, err
}

// MarkStopped records the clean stop of daemon id (stopped_at now,
// clean_stop 1).
func MarkStopped(ctx context.Context, db *store.DB, id DaemonID) error {
	return db.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("boot.stopped")
		_, err := tx.Exec(`UPDATE boot_epochs SET stopped_at = ?, clean_stop = 1 WHERE epoch = ?`, store.Now(), id)
		return err
	})
}
