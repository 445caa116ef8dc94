// Command sessiond-campaign is the PostgreSQL failover campaign (issue 27):
// N sessiond daemons on one private PostgreSQL database under a steady
// load of inputs, while a seeded random schedule SIGKILLs, SIGSTOPs (a
// pause longer than the lease) and SIGTERMs daemons and SIGKILLs the
// PostgreSQL server itself; an operator loop resolves the unknown
// admissions the crashes leave. At the end every daemon and the server are
// brought back, the queues drain, and the invariants of
// fixtures/crashcheck are checked on what the clients were told, what the
// store holds and what the fake model received. Exit status 0 when they
// hold, 1 when one is broken (each printed), 2 on a usage or set-up error.
//
//	sessiond-campaign --sessiond bin/sessiond --daemons 3 --kills 1000 --seed 42
//
// The seed is printed at the start; the same seed replays the same
// schedule of faults (the moments they land in the daemons' work differ
// with the machine's timing). docs/reliability.md has a 1,000-fault run.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/jmoiron/sqlx"

	"github.com/sessiond/sessiond/fixtures/crashcheck"
	"github.com/sessiond/sessiond/fixtures/fakemodel"
	"github.com/sessiond/sessiond/fixtures/pgtest"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
)

type options struct {
	sessiond string
	daemons  int
	sessions int
	kills    int
	seed     uint64
	interval time.Duration
	leaseTTL int
	drain    time.Duration
	keep     bool
}

func main() {
	var o options
	flag.StringVar(&o.sessiond, "sessiond", "bin/sessiond", "the sessiond binary to run")
	flag.IntVar(&o.daemons, "daemons", 3, "daemons on the one database (at least 2)")
	flag.IntVar(&o.sessions, "sessions", 6, "sessions, each fed by one client that submits its next input once the last settled")
	flag.IntVar(&o.kills, "kills", 100, "faults to inject (daemon SIGKILL, SIGSTOP, SIGTERM; PostgreSQL SIGKILL)")
	flag.Uint64Var(&o.seed, "seed", 0, "seed of the fault schedule (0: a random one, printed)")
	flag.DurationVar(&o.interval, "interval", 700*time.Millisecond, "mean time between two faults")
	flag.IntVar(&o.leaseTTL, "lease-ttl", 2, "cluster.lease_ttl of the daemons, in seconds")
	flag.DurationVar(&o.drain, "drain", 3*time.Minute, "how long the queues may take to drain at the end")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (homes, logs, the database) at the end")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: sessiond-campaign [flags]\n\nThe PostgreSQL failover campaign (docs/reliability.md).\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if o.daemons < 2 || o.sessions < 1 || o.kills < 0 || o.interval <= 0 || o.leaseTTL < 1 {
		fmt.Fprintln(os.Stderr, "sessiond-campaign: --daemons must be at least 2, --sessions at least 1, --kills at least 0, --interval and --lease-ttl positive")
		os.Exit(2)
	}
	if o.seed == 0 {
		var b [8]byte
		rand.Read(b[:])
		o.seed = uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 | uint64(b[4]&0x7f)<<32
	}
	c, err := newCampaign(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sessiond-campaign:", err)
		os.Exit(2)
	}
	code := c.run()
	c.close()
	os.Exit(code)
}

// daemon is one sessiond process slot: its home and the current process.
type daemon struct {
	i    int
	home string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd exited
	desc protocol.Descriptor
	runs int
	// state is "up", "stopped" (SIGSTOP), "down" (exited, not restarted yet).
	state string
}

type campaign struct {
	o     options
	rng   *mrand.Rand
	dir   string
	pg    *pgtest.Cluster
	dsn   string
	model *fakemodel.Model
	db    *sqlx.DB
	ds    []*daemon
	token string

	mu        sync.Mutex
	sessions  []string
	inputs    []crashcheck.Input
	acked     map[string]string
	resolved  map[string]bool
	twoStart  []string
	faults    map[string]int
	retries   atomic.Int64
	pgDown    atomic.Bool
	logOut    io.Writer
	stopLoad  chan struct{}
	loadDone  sync.WaitGroup
	opDone    chan struct{}
	stopOp    chan struct{}
	startedAt time.Time
}

func newCampaign(o options) (*campaign, error) {
	bin, err := filepath.Abs(o.sessiond)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("--sessiond: %w (make build)", err)
	}
	o.sessiond = bin
	c := &campaign{o: o, rng: mrand.New(mrand.NewPCG(o.seed, 27)), acked: map[string]string{}, resolved: map[string]bool{},
		faults: map[string]int{}, logOut: os.Stdout, stopLoad: make(chan struct{}), opDone: make(chan struct{}), stopOp: make(chan struct{})}
	if c.dir, err = os.MkdirTemp("", "sessiond-campaign-"); err != nil {
		return nil, err
	}
	if c.pg, err = pgtest.Start(pgtest.Options{Durable: true}); err != nil {
		return nil, err
	}
	if _, c.dsn, err = c.pg.CreateDatabase(); err != nil {
		return nil, err
	}
	if c.model, err = fakemodel.Start(); err != nil {
		return nil, err
	}
	c.model.DefaultFunc(func(req fakemodel.RecordedRequest) fakemodel.Reply {
		if req.LastIsToolResult {
			return fakemodel.Reply{Text: "done", ChunkDelay: 2 * time.Millisecond}
		}
		if strings.HasSuffix(req.LastUserText(), "(run a command)") {
			return fakemodel.Reply{Delay: 20 * time.Millisecond, ToolCalls: []fakemodel.ToolCall{{Name: "terminal", Arguments: `{"command":"echo campaign"}`}}}
		}
		return fakemodel.Reply{Text: "an answer in a few chunks", Delay: 20 * time.Millisecond, ChunkDelay: 5 * time.Millisecond}
	})
	tok := make([]byte, 32)
	rand.Read(tok)
	c.token = hex.EncodeToString(tok)
	tokenFile := filepath.Join(c.dir, "token")
	if err := os.WriteFile(tokenFile, []byte(c.token+"\n"), 0o600); err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf("model: {provider: openai, default: %s, base_url: %q}\nstore: {driver: postgres, dsn: %q}\ncluster: {lease_ttl: %d}\nauth: {token_file: %q}\n",
		fakemodel.ModelName, c.model.URL(), c.dsn, o.leaseTTL, tokenFile)
	for i := range o.daemons {
		home := filepath.Join(c.dir, fmt.Sprintf("daemon-%d", i))
		if err := os.MkdirAll(home, 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
			return nil, err
		}
		c.ds = append(c.ds, &daemon{i: i, home: home})
	}
	if c.db, err = sqlx.Open("pgx", c.dsn); err != nil {
		return nil, err
	}
	c.db.SetMaxOpenConns(2)
	return c, nil
}

func (c *campaign) logf(format string, args ...any) {
	fmt.Fprintf(c.logOut, "%7.1fs  %s\n", time.Since(c.startedAt).Seconds(), fmt.Sprintf(format, args...))
}

// start runs a new process of d and waits until its descriptor names it
// and answers.
func (c *campaign) start(d *daemon) error {
	d.mu.Lock()
	d.runs++
	n := d.runs
	d.mu.Unlock()
	logf, err := os.Create(filepath.Join(d.home, fmt.Sprintf("sessiond-%d.log", n)))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(c.o.sessiond, "--home", d.home)
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY=campaign")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = dieWithCampaign()
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	d.mu.Lock()
	d.cmd, d.done = cmd, done
	d.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("daemon %d exited at start: %s", d.i, tailFile(logf.Name()))
		default:
		}
		if desc, err := protocol.ReadDescriptor(d.home); err == nil && desc.PID == cmd.Process.Pid {
			d.mu.Lock()
			d.desc, d.state = desc, "up"
			d.mu.Unlock()
			return nil
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-done
			return fmt.Errorf("daemon %d not ready within 60 s", d.i)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tailFile(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// restart starts d again, retrying (a daemon cannot start while the
// database is down) for up to two minutes.
func (c *campaign) restart(d *daemon) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := c.start(d)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// live returns the daemons that are up, in random order.
func (c *campaign) live(rng *mrand.Rand) []*daemon {
	var out []*daemon
	for _, d := range c.ds {
		d.mu.Lock()
		if d.state == "up" {
			out = append(out, d)
		}
		d.mu.Unlock()
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// callAny calls method on some live daemon, trying others (and again
// after a pause) while the daemons or the database are down; a refusal
// that is not about availability is returned.
func (c *campaign) callAny(rng *mrand.Rand, method string, params, result any, give time.Duration) error {
	deadline := time.Now().Add(give)
	for attempt := 0; ; attempt++ {
		for _, d := range c.live(rng) {
			d.mu.Lock()
			desc := d.desc
			d.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			cl, err := rpc.Dial(ctx, desc.URL, rpc.DialOptions{Token: desc.Token, OnNotification: func(rpc.Notification) {}})
			if err == nil {
				err = cl.Call(ctx, method, params, result)
				cl.Close()
			}
			cancel()
			var pe *protocol.Error
			if err == nil {
				return nil
			}
			if errors.As(err, &pe) && pe.Reason != protocol.ReasonStorageUnavailable && pe.Reason != protocol.ReasonDraining && pe.Reason != protocol.ReasonOverloaded {
				return err
			}
			c.retries.Add(1)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no daemon answered within %v", method, give)
		}
		time.Sleep(time.Duration(50+rng.IntN(200)) * time.Millisecond)
	}
}

func (c *campaign) run() int {
	c.startedAt = time.Now()
	c.logf("seed %d: %d daemons, %d sessions, %d faults every ~%v, lease_ttl %ds; work directory %s",
		c.o.seed, c.o.daemons, c.o.sessions, c.o.kills, c.o.interval, c.o.leaseTTL, c.dir)
	for _, d := range c.ds {
		if err := c.start(d); err != nil {
			c.logf("set-up: %v", err)
			return 2
		}
	}
	setup := mrand.New(mrand.NewPCG(c.o.seed, 1))
	for i := range c.o.sessions {
		var s struct {
			SessionID string `json:"session_id"`
		}
		cwd := filepath.Join(c.dir, fmt.Sprintf("cwd-%d", i))
		os.MkdirAll(cwd, 0o755)
		if err := c.callAny(setup, "session.create", map[string]any{"cwd": cwd, "request_id": fmt.Sprintf("campaign-%d", i)}, &s, time.Minute); err != nil {
			c.logf("set-up: %v", err)
			return 2
		}
		c.sessions = append(c.sessions, s.SessionID)
	}
	go c.operator()
	for i := range c.sessions {
		c.loadDone.Add(1)
		go c.feed(i)
	}
	c.chaos()
	c.logf("faults done: %v; bringing everything back", c.faults)
	if c.pgDown.Load() {
		if err := c.pg.StartServer(); err != nil {
			c.logf("restart PostgreSQL: %v", err)
			return 2
		}
		c.pgDown.Store(false)
	}
	for _, d := range c.ds {
		d.mu.Lock()
		st := d.state
		d.mu.Unlock()
		switch st {
		case "stopped":
			d.cmd.Process.Signal(syscall.SIGCONT)
			d.mu.Lock()
			d.state = "up"
			d.mu.Unlock()
		case "down":
			if err := c.restart(d); err != nil {
				c.logf("restart: %v", err)
				return 2
			}
		}
	}
	close(c.stopLoad)
	c.loadDone.Wait()
	c.logf("load stopped; draining the queues")
	drained := c.waitDrained()
	close(c.stopOp)
	<-c.opDone
	return c.check(drained)
}

// feed is one client of session i: it submits its next input (retrying
// the same input_id through any daemon until a receipt comes) and waits
// until that admission left the queue before the next.
func (c *campaign) feed(i int) {
	defer c.loadDone.Done()
	rng := mrand.New(mrand.NewPCG(c.o.seed, uint64(100+i)))
	for k := 1; ; k++ {
		select {
		case <-c.stopLoad:
			return
		default:
		}
		id := fmt.Sprintf("in-%d-%d", i, k)
		text := fmt.Sprintf("session %d input %d", i, k)
		if rng.IntN(3) == 0 {
			text += " (run a command)"
		}
		c.mu.Lock()
		c.inputs = append(c.inputs, crashcheck.Input{ID: id, Session: i, Text: text, Want: []string{"completed", "interrupted", "failed"}})
		c.mu.Unlock()
		var rc struct {
			AdmissionID string `json:"admission_id"`
		}
		if err := c.callAny(rng, "prompt.submit", map[string]any{"session_id": c.sessions[i], "input_id": id, "text": text}, &rc, 5*time.Minute); err != nil {
			c.logf("session %d: %s never acknowledged: %v", i, id, err)
			return
		}
		c.mu.Lock()
		c.acked[id] = rc.AdmissionID
		c.mu.Unlock()
		for {
			var st string
			err := c.db.Get(&st, `SELECT status FROM session_admissions WHERE admission_id = $1`, rc.AdmissionID)
			if err == nil && (st == "terminal" || st == "unknown") {
				break
			}
			select {
			case <-c.stopLoad:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// operator resolves unknown admissions (prompt.resolve_unknown) and notes
// a session seen with two started admissions.
func (c *campaign) operator() {
	defer close(c.opDone)
	rng := mrand.New(mrand.NewPCG(c.o.seed, 2))
	for {
		select {
		case <-c.stopOp:
			return
		case <-time.After(200 * time.Millisecond):
		}
		var two []string
		if err := c.db.Select(&two, `SELECT target_session_id FROM session_admissions WHERE status = 'started'
			GROUP BY target_session_id HAVING count(*) > 1`); err == nil && len(two) > 0 {
			c.mu.Lock()
			c.twoStart = append(c.twoStart, fmt.Sprintf("%v at %.1fs", two, time.Since(c.startedAt).Seconds()))
			c.mu.Unlock()
		}
		var unknown []crashcheck.Row
		if err := c.db.Select(&unknown, `SELECT admission_id, target_session_id, request_id, seq, status, outcome, execution_generation
			FROM session_admissions WHERE status = 'unknown'`); err != nil {
			continue
		}
		for _, u := range unknown {
			var rc struct{}
			err := c.callAny(rng, "prompt.resolve_unknown", map[string]any{"session_id": u.SessionID, "admission_id": u.AdmissionID,
				"execution_generation": u.ExecutionGeneration.Int64}, &rc, 30*time.Second)
			if err == nil {
				c.mu.Lock()
				c.resolved[u.AdmissionID] = true
				c.mu.Unlock()
			}
		}
	}
}

// chaos injects the faults: each is a SIGKILL (45%), a SIGSTOP for one to
// two lease TTLs (20%) or a SIGTERM (20%) of a random running daemon —
// never the last one running — or a SIGKILL of the PostgreSQL server
// (15%); the victim comes back after a random pause.
func (c *campaign) chaos() {
	var wg sync.WaitGroup
	defer wg.Wait()
	ttl := time.Duration(c.o.leaseTTL) * time.Second
	for n := 0; n < c.o.kills; {
		// The same four draws every round, whatever happens: the seed
		// fixes the schedule (which daemon is up when a fault lands depends
		// on the machine's timing).
		pause := time.Duration(float64(c.o.interval) * (0.5 + c.rng.Float64()))
		p := c.rng.IntN(100)
		back := time.Duration(c.rng.IntN(int(ttl/time.Millisecond)+1)) * time.Millisecond
		victim := c.rng.IntN(1 << 20)
		time.Sleep(pause)
		if p >= 85 {
			if c.pgDown.Load() {
				continue
			}
			if err := c.pg.KillServer(); err != nil {
				c.logf("SIGKILL PostgreSQL: %v", err)
				continue
			}
			n++
			c.count("postgres SIGKILL")
			c.pgDown.Store(true)
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(back)
				if err := c.pg.StartServer(); err != nil {
					c.logf("restart PostgreSQL: %v", err)
					return
				}
				c.pgDown.Store(false)
			}()
			continue
		}
		var up []*daemon
		for _, d := range c.ds {
			d.mu.Lock()
			if d.state == "up" {
				up = append(up, d)
			}
			d.mu.Unlock()
		}
		if len(up) < 2 {
			continue
		}
		d := up[victim%len(up)]
		d.mu.Lock()
		cmd, done := d.cmd, d.done
		d.mu.Unlock()
		switch {
		case p < 45:
			cmd.Process.Signal(syscall.SIGKILL)
			c.down(d, "SIGKILL")
			<-done
		case p < 65:
			cmd.Process.Signal(syscall.SIGSTOP)
			d.mu.Lock()
			d.state = "stopped"
			d.mu.Unlock()
			c.count("daemon SIGSTOP")
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(ttl + back)
				cmd.Process.Signal(syscall.SIGCONT)
				d.mu.Lock()
				d.state = "up"
				d.mu.Unlock()
			}()
			n++
			continue
		default:
			cmd.Process.Signal(syscall.SIGTERM)
			c.down(d, "SIGTERM")
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				c.logf("daemon %d did not stop within 60 s of SIGTERM; killing it", d.i)
				cmd.Process.Kill()
				<-done
			}
		}
		n++
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(back)
			if err := c.restart(d); err != nil {
				c.logf("restart: %v", err)
			}
		}()
	}
}

func (c *campaign) down(d *daemon, how string) {
	d.mu.Lock()
	d.state = "down"
	d.mu.Unlock()
	c.count("daemon " + how)
}

// count records one fault; every hundredth is logged.
func (c *campaign) count(what string) {
	c.mu.Lock()
	c.faults[what]++
	n := sum(c.faults)
	c.mu.Unlock()
	if n%100 == 0 {
		c.logf("%d faults: %v", n, c.snapshotFaults())
	}
}

func (c *campaign) snapshotFaults() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.faults {
		out[k] = v
	}
	return out
}

// waitDrained waits until no admission is queued, started or unknown.
func (c *campaign) waitDrained() bool {
	deadline := time.Now().Add(c.o.drain)
	for time.Now().Before(deadline) {
		var n int
		if err := c.db.Get(&n, `SELECT count(*) FROM session_admissions WHERE status <> 'terminal'`); err == nil && n == 0 {
			return true
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}

func (c *campaign) check(drained bool) int {
	var rows []crashcheck.Row
	if err := c.db.Select(&rows, `SELECT admission_id, target_session_id, request_id, seq, status, outcome, execution_generation
		FROM session_admissions ORDER BY target_session_id, seq`); err != nil {
		c.logf("read the admissions: %v", err)
		return 2
	}
	c.mu.Lock()
	rec := crashcheck.Record{Sessions: c.sessions, Inputs: c.inputs, Acked: c.acked, CancelAcked: map[string]bool{},
		Resolved: c.resolved, Rows: rows, TwoStarted: c.twoStart, Requests: c.model.Requests()}
	c.mu.Unlock()
	// Inputs that never got a receipt may or may not have a row (the
	// commit of one whose answer was lost); both are fine.
	bad := crashcheck.Check(rec)
	outcomes := map[string]int{}
	for _, r := range rows {
		outcomes[r.Status+"/"+r.Outcome.String]++
	}
	var dur = time.Since(c.startedAt)
	fmt.Fprintf(c.logOut, "\nseed %d, %v: %d faults %v, %d inputs acknowledged (%d submitted), admissions %v, %d resolved as unknown, %d model requests, %d submit/resolve attempts retried on another daemon or later\n",
		c.o.seed, dur.Round(time.Second), sum(c.faults), c.faults, len(c.acked), len(c.inputs), outcomes, len(c.resolved), len(rec.Requests), c.retries.Load())
	if !drained {
		bad = append(bad, fmt.Sprintf("the queues did not drain within %v", c.o.drain))
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		fmt.Fprintf(c.logOut, "%d invariants broken:\n  %s\n", len(bad), strings.Join(bad, "\n  "))
		fmt.Fprintf(c.logOut, "replay: sessiond-campaign --seed %d --daemons %d --sessions %d --kills %d --interval %v --lease-ttl %d; logs in %s\n",
			c.o.seed, c.o.daemons, c.o.sessions, c.o.kills, c.o.interval, c.o.leaseTTL, c.dir)
		c.o.keep = true
		return 1
	}
	fmt.Fprintln(c.logOut, "every invariant held")
	return 0
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func (c *campaign) close() {
	for _, d := range c.ds {
		d.mu.Lock()
		cmd, done := d.cmd, d.done
		d.mu.Unlock()
		if cmd == nil {
			continue
		}
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
	if c.db != nil {
		c.db.Close()
	}
	if c.model != nil {
		c.model.Close()
	}
	if c.pg != nil {
		c.pg.Stop()
	}
	if !c.o.keep {
		os.RemoveAll(c.dir)
	}
}
