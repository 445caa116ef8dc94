package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/cluster"
	"github.com/sessiond/sessiond/prompts"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
	"github.com/sessiond/sessiond/sandbox"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/tools"
)

// Version is the daemon's version, set at build time with
// -ldflags "-X github.com/sessiond/sessiond/daemon.Version=…".
var Version = "0.1.0-dev"

// Options configure a Daemon.
type Options struct {
	Home   string       // resolved home directory (see ResolveHome)
	Logger *slog.Logger // default slog.Default()
	// Listen, when not empty, replaces config.yaml's listen (sessiond
	// --listen): a loopback host:port.
	Listen string
	// statePath, tests only, puts state.db elsewhere than in the home, so
	// that several in-process daemons share one SQLite database as a
	// cluster (then no daemon may assume it is alone: see joinCluster).
	statePath string
	// StoreDSN, when not empty, replaces config.yaml's store (sessiond
	// --store-dsn): the PostgreSQL database to use.
	StoreDSN string
}

// Daemon is one running sessiond.
type Daemon struct {
	home    string
	cfg     Config
	log     *slog.Logger
	lock    *HomeLock
	db      *store.DB
	epoch   cluster.DaemonID
	token   string
	desc    Descriptor
	start   time.Time
	queue   *admission.Queue
	sched   *admission.Scheduler
	prompts *prompts.Manager
	hub     *hub
	mux     *rpc.Mux
	mcp     *mcpRegistry // the sessions' MCP servers (mcp.go)

	// The cluster (cluster.go): the store's dialect, the bus between the
	// daemons sharing it, this daemon's lease, and the wake-ups it serves.
	exclusive  bool // state.db is in the locked home: no other daemon uses it
	dialect    cluster.Dialect
	bus        *cluster.Bus
	member     *cluster.Member
	wakeups    *wakeSet
	expiryMu   sync.Mutex
	expiry     *time.Timer // armExpiry
	wakeDone   chan struct{}
	stopListen []func()
	metrics    *metrics

	metricsSrv  *http.Server // metrics_listen, when set
	metricsAddr string

	ln       net.Listener
	srv      *http.Server
	draining atomic.Bool
	ctx      context.Context // ends at stop; parent of every connection
	cancel   context.CancelFunc

	connMu sync.Mutex
	conns  map[*rpc.Conn]struct{}
	connWG sync.WaitGroup
	// revoked holds the client ids revoked by this process (guarded by
	// connMu): an upgrade authenticated just before a revocation is closed
	// when it registers (pair.go).
	revoked map[string]bool
	// pairMux serves GET /pair; pairLimit bounds failed codes per peer.
	pairMux   *rpc.Mux
	pairLimit pairLimiter
	pairConns int // open GET /pair connections (guarded by connMu)

	// sandboxErr says why this kernel cannot enforce the configured
	// sandbox (nil: it can, or the mode is off).
	sandboxErr error
	// prestarts holds the sandbox helpers pre-started for the next
	// command of each session's spec (closed at Stop).
	prestarts *tools.Prestarts
	// storeSockets are the unix sockets of the store's PostgreSQL server
	// (none on SQLite or over TCP): the DSN's and every one the server
	// reports (store.DB.ServerSocketFiles), kept out of every sandboxed
	// command's view like the home.
	storeSockets []string
	// hiddenFiles are the daemon's secrets outside its home that no
	// command may read: auth.token_file.
	hiddenFiles []string

	stopOnce sync.Once
	stopErr  error
	done     chan struct{}
}

// Start brings a daemon up on opt.Home: it creates the home (0700), takes
// the lock (ErrHomeLocked if another daemon owns it), reads config.yaml,
// opens state.db, records a new boot epoch, runs boot recovery, listens,
// writes the descriptor and starts scheduling. On error everything already
// acquired is released.
func Start(ctx context.Context, opt Options) (_ *Daemon, err error) {
	log := opt.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := PrepareHome(opt.Home); err != nil {
		return nil, err
	}
	cfg, warnings, err := LoadConfig(filepath.Join(opt.Home, ConfigFile))
	for _, w := range warnings {
		log.Warn(w)
	}
	if err != nil {
		return nil, err
	}
	if err := cfg.overrideListen(opt.Listen); err != nil {
		return nil, err
	}
	if err := cfg.overrideStoreDSN(opt.StoreDSN); err != nil {
		return nil, err
	}
	lock, err := LockHome(opt.Home)
	if err != nil {
		return nil, err
	}
	token, created, err := LoadToken(cfg.Auth.tokenPath(opt.Home))
	if err != nil {
		lock.Release()
		return nil, err
	}
	if created {
		log.Info("created the token file auth.token_file: copy it to every daemon sharing this store", "path", cfg.Auth.tokenPath(opt.Home))
	}
	d := &Daemon{home: opt.Home, cfg: cfg, log: log, lock: lock, token: token, start: time.Now().UTC(),
		hiddenFiles: []string{cfg.Auth.tokenPath(opt.Home)},
		conns:       map[*rpc.Conn]struct{}{}, revoked: map[string]bool{}, done: make(chan struct{})}
	d.metrics = newMetrics(d)
	defer func() {
		if err != nil {
			d.release()
		}
	}()
	driver, dsn := cfg.StoreOptions()
	statePath := filepath.Join(opt.Home, StateFile)
	d.exclusive = opt.statePath == "" && driver == store.SQLite
	if opt.statePath != "" {
		statePath = opt.statePath
	}
	where := statePath
	if driver == store.SQLite {
		// SQLite creates state.db (and its -wal and -shm, which copy the
		// database's mode) 0644; make it private first.
		if f, err := os.OpenFile(where, os.O_RDWR|os.O_CREATE, 0o600); err == nil {
			f.Close()
		}
	} else {
		where = "PostgreSQL " + store.RedactDSN(dsn)
		d.storeSockets = store.SocketFiles(dsn)
	}
	d.db, err = store.Open(ctx, statePath,
		store.Options{Driver: driver, DSN: dsn, MaxConns: cfg.Store.MaxConns, BusyTimeout: time.Duration(cfg.Storage.BusyTimeout) * time.Millisecond,
			CheckpointInterval: time.Duration(cfg.Storage.CheckpointInterval) * time.Second, Logger: log,
			OnCommit: d.metrics.observeCommit})
	if err != nil {
		if driver == store.SQLite {
			return nil, fmt.Errorf("open %s: %w%s", where, err, diskFullHint(opt.Home))
		}
		return nil, fmt.Errorf("open %s: %w", where, err)
	}
	log.Info("store opened", "driver", string(driver), "database", d.db.Path())
	if driver == store.Postgres {
		// Every socket directory the server listens in, not only the DSN's.
		socks, err := d.db.ServerSocketFiles(ctx)
		if err != nil {
			d.db.Close()
			return nil, fmt.Errorf("read the PostgreSQL server's socket directories: %w", err)
		}
		for _, s := range socks {
			if !slices.Contains(d.storeSockets, s) {
				d.storeSockets = append(d.storeSockets, s)
			}
		}
	}
	d.hub = newHub(log)
	d.mcp = newMCPRegistry(d)
	d.db.SetEventSink(d.observeEvent)
	if d.epoch, err = cluster.Register(ctx, d.db, os.Getpid(), Version, store.FormatTime(d.start)); err != nil {
		return nil, fmt.Errorf("record boot epoch: %w", err)
	}
	if err := d.joinCluster(ctx); err != nil {
		return nil, fmt.Errorf("join the cluster: %w", err)
	}
	d.queue = &admission.Queue{DB: d.db, Daemon: d.epoch, MaxQueued: cfg.Limits.MaxQueuedPerSession,
		Label: cfg.Cluster.Label, Bus: d.bus}
	// The scheduler is built before the prompts manager, which takes its
	// live check (the in-memory half of the fence) at construction; the
	// executor reaches the manager through the daemon (prompter), and runs
	// only once the scheduler starts.
	exec, err := d.newExecutor()
	if err != nil {
		return nil, err
	}
	d.sched = admission.NewScheduler(d.queue, exec, cfg.Limits.MaxConcurrentTurns, d.closePrompts, log)
	d.prompts = prompts.NewManager(d.db, d.epoch, d.sched, log)
	d.prompts.SetCluster(d.bus)
	d.queue.OnTake = d.prompts.FenceSession
	// Recovery is a named step before serving: this daemon takes every
	// session whose owner is gone (on SQLite: every session), their started
	// rows become unknown and their prompts close.
	rec, err := d.queue.Recover(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("boot recovery: %w", err)
	}
	for _, a := range rec.Unknown {
		log.Warn("admission left started by an earlier daemon is now unknown; it holds its session's queue until an operator resolves it (prompt.resolve_unknown; sessionctl resolve SESSION ADMISSION)",
			"audit", true, "session_id", a.SessionID, "admission_id", a.AdmissionID, "execution_generation", a.Generation())
	}
	if err := d.killLeftoverTools(ctx); err != nil {
		return nil, fmt.Errorf("boot recovery: %w", err)
	}
	// Every sandboxed command of every daemon of this user hides this home
	// from now on, also when it lies in another daemon's workspace.
	if err := sandbox.RegisterHome(opt.Home); err != nil {
		log.Warn("this home could not be registered: commands of other sessiond daemons may change it when it lies in their workspace; where the registry cannot be trusted, no sandboxed command runs until it is fixed", "error", err.Error())
	}
	// Probed in mode off too: sessions created earlier keep their own
	// (frozen) sandbox and fail closed when it cannot be enforced.
	if d.sandboxErr = sandbox.Probe(); d.sandboxErr != nil && cfg.Sandbox.Mode != string(sandbox.ModeOff) {
		log.Warn("the sandbox is not available: every terminal command needs approval (as in approvals.mode strict) and runs unsandboxed once approved; set sandbox: {mode: off} in config.yaml to run them unsandboxed as before",
			"reason", d.sandboxErr.Error())
	}
	if d.mux, err = d.routes(); err != nil {
		return nil, err
	}
	if d.pairMux, err = d.pairRoutes(); err != nil {
		return nil, err
	}

	d.ctx, d.cancel = context.WithCancel(context.Background())
	go d.revocationSweep(d.ctx)
	d.ln, err = net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	d.srv = &http.Server{Handler: d.httpHandler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	d.desc = Descriptor{PID: os.Getpid(), URL: "ws://" + d.ln.Addr().String() + "/rpc", Token: d.token,
		Protocol: protocol.Version, Version: Version, BootEpoch: int64(d.epoch), StartedAt: store.FormatTime(d.start)}
	go func() {
		if err := d.srv.Serve(d.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server", "err", err)
		}
	}()
	if err := d.startMetricsListener(); err != nil {
		return nil, err
	}
	if err := WriteDescriptor(opt.Home, d.desc); err != nil {
		return nil, fmt.Errorf("write descriptor: %w", err)
	}
	if cfg.Model.Default == "" {
		log.Warn("no model.default in config.yaml: session.create must name a model", "config", filepath.Join(opt.Home, ConfigFile))
	}
	d.sched.Start(rec.Sessions)
	log.Info("sessiond listening", "url", d.desc.URL, "home", opt.Home, "boot_epoch", d.epoch,
		"pid", d.desc.PID, "version", Version, "unknown_admissions", len(rec.Unknown))
	d.startCluster()
	return d, nil
}

// Descriptor returns what daemon.json says.
func (d *Daemon) Descriptor() Descriptor { return d.desc }

// Done is closed when Stop finished.
func (d *Daemon) Done() <-chan struct{} { return d.done }

// Stop is the graceful stop of PROTOCOL.md section 5: refuse new work
// (draining), interrupt running turns and settle them interrupted, close
// every connection with 1001, stop the server, close the store, remove the
// descriptor and release the lock. Queued admissions stay queued. ctx
// bounds the wait for turns to settle.
func (d *Daemon) Stop(ctx context.Context) error {
	d.stopOnce.Do(func() {
		d.draining.Store(true)
		d.log.Info("stopping: draining and interrupting running turns")
		if err := d.sched.Stop(ctx); err != nil {
			d.stopErr = fmt.Errorf("settle running turns: %w", err)
		}
		d.mcp.stopAll()     // no turn runs any more: every MCP server stops
		d.prestarts.Close() // and no pre-started sandbox helper waits
		// Hand over at once: another daemon resumes the queues.
		hctx, hcancel := context.WithTimeout(context.Background(), 5*time.Second)
		d.stopCluster(hctx)
		hcancel()
		d.connMu.Lock()
		for c := range d.conns {
			c.Close(websocket.StatusGoingAway, "daemon stopping")
		}
		d.connMu.Unlock()
		shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		d.srv.Shutdown(shutCtx)
		cancel()
		waitCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		waitGroup(waitCtx, &d.connWG)
		cancel()
		d.cancel()
		d.prompts.Stop()
		if err := cluster.MarkStopped(context.Background(), d.db, d.epoch); err != nil {
			d.log.Error("record clean stop", "err", err)
		}
		d.release()
		d.log.Info("stopped")
		close(d.done)
	})
	return d.stopErr
}

func waitGroup(ctx context.Context, wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// release frees what Start acquired, in reverse order.
func (d *Daemon) release() {
	if d.bus != nil {
		d.bus.Close()
	}
	if d.metricsSrv != nil {
		d.metricsSrv.Close()
	}
	if d.srv != nil {
		d.srv.Close()
	} else if d.ln != nil {
		d.ln.Close()
	}
	if d.db != nil {
		if err := d.db.Close(); err != nil {
			d.log.Error("close store", "err", err)
		}
	}
	if d.desc.PID != 0 {
		if err := RemoveDescriptor(d.home, d.desc.PID); err != nil {
			d.log.Error("remove descriptor", "err", err)
		}
	}
	d.lock.Release()
}
