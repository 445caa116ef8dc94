package admission_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/cluster"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/store"
)

var (
	modelSeed  = flag.Uint64("admission.seed", 0, "seed of TestModelRandomized (0: time-based; run i uses seed+i)")
	modelSteps = flag.Int("admission.steps", 3200, "total random steps of TestModelRandomized, split over -admission.runs")
	modelRuns  = flag.Int("admission.runs", 4, "independent stores (parallel subtests) of TestModelRandomized")
)

// mAdm is the model's view of one admission.
type mAdm struct {
	id, input, text, sess string
	seq                   int64
	status                admission.Status
	outcome               string
	gen                   int64
	epoch                 cluster.DaemonID // the daemon that started it (owner_epoch)
	errText               string
	claimed               bool // claimed, or taken into a turn as a steer
	origText              string
	delivery              protocol.Delivery
	steeredInto           string
}

func (a *mAdm) isSteer() bool { return a.steeredInto != "" }

type mSess struct {
	id         string
	adms       []*mAdm // seq order
	queue      []*mAdm // the queued admissions in the order they run
	byInput    map[string]*mAdm
	gen        int64
	nextSeq    int64
	events     int64
	claimCount int
	// interruptGen is sessions.interrupt_generation: the generation a
	// when_busy interrupt asked to stop (0: none); that turn takes no
	// steers.
	interruptGen int64
}

type model struct {
	t       *testing.T
	e       *env
	r       *rand.Rand
	seed    uint64
	step    int
	op      string
	sess    []*mSess
	byID    map[string]*mAdm
	nextIn  int
	claimed map[string]int // admission id → claims seen
}

func (m *model) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("seed=%d step=%d op=%s: %s\nreproduce: go test -race -run 'TestModelRandomized' ./admission/ -args -admission.seed=%d -admission.runs=1 -admission.steps=%d",
		m.seed, m.step, m.op, fmt.Sprintf(format, args...), m.seed, m.step+1)
}

func (m *model) expectErr(err, want error) {
	m.t.Helper()
	if !errors.Is(err, want) {
		m.fatalf("want %s, got %s", errName(want), errName(err))
	}
}

func (m *model) pick(n int) int { return m.r.IntN(n) }

// waitReason is the documented rule for a queued receipt's reason: an
// unknown admission holds the queue, a started one makes it busy, then the
// capacity, then the queued inputs ahead of it in the queue's order.
func (s *mSess) waitReason(a *mAdm, atCap bool) protocol.WaitReason {
	var unknown, started, ahead bool
	for _, b := range s.adms {
		unknown = unknown || b.status == admission.StatusUnknown
		started = started || b.status == admission.StatusStarted
	}
	ahead = slices.Index(s.queue, a) > 0
	switch {
	case unknown:
		return admission.WaitUnknown
	case started:
		return admission.WaitBusy
	case atCap:
		return admission.WaitCapacity
	case ahead:
		return admission.WaitBusy
	}
	return ""
}

func (s *mSess) withStatus(st admission.Status) []*mAdm {
	var out []*mAdm
	for _, a := range s.adms {
		if a.status == st {
			out = append(out, a)
		}
	}
	return out
}

func (m *model) eqRow(ma *mAdm, a admission.Admission) error {
	var diffs []string
	cmp := func(name string, got, want any) {
		if got != want {
			diffs = append(diffs, fmt.Sprintf("%s=%v want %v", name, got, want))
		}
	}
	cmp("admission_id", a.AdmissionID, ma.id)
	cmp("session", a.SessionID, ma.sess)
	cmp("input_id", a.InputID, ma.input)
	cmp("text", a.Text, ma.text)
	cmp("seq", a.Seq, ma.seq)
	cmp("status", a.Status, ma.status)
	cmp("outcome", a.Outcome.String, ma.outcome)
	cmp("outcome set", a.Outcome.Valid, ma.outcome != "")
	cmp("generation", a.ExecutionGeneration.Int64, ma.gen)
	cmp("generation set", a.ExecutionGeneration.Valid, ma.gen != 0)
	cmp("owner_epoch", a.Daemon.V, ma.epoch)
	cmp("error", a.Error.String, ma.errText)
	cmp("delivery", a.Delivery, ma.delivery)
	cmp("steered_into", a.SteeredInto.String, ma.steeredInto)
	if len(diffs) > 0 {
		return fmt.Errorf("admission %s (%s seq %d): %s", ma.id, ma.sess, ma.seq, strings.Join(diffs, ", "))
	}
	return nil
}

// checkSession compares what the store holds for s with the model: the
// session row (generation, next seq, event count) and every non-terminal
// admission, and the structural invariants of the FIFO.
func (m *model) checkSession(s *mSess) {
	m.t.Helper()
	sr := m.e.sess(s.id)
	if sr.Gen != s.gen || sr.NextSeq != s.nextSeq || sr.LastEvent != s.events {
		m.fatalf("session %s row %+v, model gen=%d next_seq=%d events=%d", s.id, sr, s.gen, s.nextSeq, s.events)
	}
	// The columns that move; text and input ids are compared in checkRow
	// and checkAll (full rows cost a lot under -race).
	var pending []struct {
		ID      string           `db:"admission_id"`
		Seq     int64            `db:"seq"`
		Status  admission.Status `db:"status"`
		Outcome string           `db:"outcome"`
		Gen     int64            `db:"gen"`
		Epoch   cluster.DaemonID `db:"epoch"`
	}
	if err := m.e.db.Select(context.Background(), &pending, `SELECT admission_id, seq, status, coalesce(outcome, '') AS outcome,
		coalesce(execution_generation, 0) AS gen, coalesce(owner_epoch, 0) AS epoch
		FROM session_admissions WHERE status <> 'terminal' AND target_session_id = ? ORDER BY seq`, s.id); err != nil {
		m.fatalf("pending rows: %v", err)
	}
	var want []*mAdm
	for _, a := range s.adms {
		if a.status != admission.StatusTerminal {
			want = append(want, a)
		}
	}
	if len(pending) != len(want) {
		m.fatalf("session %s: %d pending rows, model has %d", s.id, len(pending), len(want))
	}
	started, unknown := 0, 0
	for i, a := range pending {
		w := want[i]
		if a.ID != w.id || a.Seq != w.seq || a.Status != w.status || a.Outcome != w.outcome || a.Gen != w.gen || a.Epoch != w.epoch {
			m.fatalf("session %s pending row %d is %+v, model %+v", s.id, i, a, *w)
		}
		switch {
		case w.isSteer():
		case a.Status == admission.StatusStarted:
			started++
		case a.Status == admission.StatusUnknown:
			unknown++
		}
	}
	if started+unknown > 1 {
		m.fatalf("session %s has %d started and %d unknown turns", s.id, started, unknown)
	}
	order, err := admission.Order(m.e.db.Reads(context.Background()), s.id)
	if err != nil {
		m.fatalf("Order: %v", err)
	}
	var wantOrder []string
	for _, a := range s.queue {
		wantOrder = append(wantOrder, a.id)
	}
	if !slices.Equal(order, wantOrder) {
		m.fatalf("session %s queue order %v, model %v", s.id, order, wantOrder)
	}
}

func (m *model) checkRow(ma *mAdm) {
	m.t.Helper()
	a, ok := m.e.row(ma.id)
	if !ok {
		m.fatalf("admission %s lost", ma.id)
	}
	if err := m.eqRow(ma, a); err != nil {
		m.fatalf("%v", err)
	}
}

// checkAll compares every row of the store with the model, and the
// transcript's user messages with the claims.
func (m *model) checkAll() {
	m.t.Helper()
	var all []admission.Admission
	if err := m.e.db.Select(context.Background(), &all, `SELECT `+admColumns+` FROM session_admissions ORDER BY target_session_id, seq`); err != nil {
		m.fatalf("%v", err)
	}
	var want []*mAdm
	for _, s := range m.sess {
		want = append(want, s.adms...)
	}
	sort.SliceStable(want, func(i, j int) bool { return want[i].sess < want[j].sess })
	if len(all) != len(want) {
		m.fatalf("store has %d admissions, model %d", len(all), len(want))
	}
	for i := range all {
		if err := m.eqRow(want[i], all[i]); err != nil {
			m.fatalf("%v", err)
		}
	}
	// Exactly one user message per claimed admission, none for the others,
	// with the admission's text.
	var users []struct {
		AdmissionID string `db:"admission_id"`
		N           int    `db:"n"`
		Content     string `db:"content"`
	}
	if err := m.e.db.Select(context.Background(), &users, `SELECT admission_id, COUNT(*) AS n, MIN(content) AS content
		FROM messages WHERE role = 'user' GROUP BY admission_id`); err != nil {
		m.fatalf("%v", err)
	}
	seen := map[string]bool{}
	for _, u := range users {
		ma := m.byID[u.AdmissionID]
		if ma == nil || !ma.claimed || u.N != 1 || u.Content != ma.text {
			m.fatalf("user messages of %s: %d (claimed in model: %v)", u.AdmissionID, u.N, ma != nil && ma.claimed)
		}
		seen[u.AdmissionID] = true
	}
	for id, n := range m.claimed {
		if n != 1 || !seen[id] {
			m.fatalf("admission %s claimed %d times, user message present: %v", id, n, seen[id])
		}
	}
	for _, s := range m.sess {
		m.checkSession(s)
		if n := m.e.count(`SELECT COUNT(*) FROM events WHERE session_id = ?`, s.id); int64(n) != s.events {
			m.fatalf("session %s has %d events, want %d (gap-free)", s.id, n, s.events)
		}
	}
}

func TestModelRandomized(t *testing.T) {
	base := *modelSeed
	if base == 0 {
		base = uint64(time.Now().UnixNano())
	}
	runs := max(*modelRuns, 1)
	steps := max(*modelSteps/runs, 1)
	t.Logf("base seed %d: %d runs × %d steps", base, runs, steps)
	for i := range runs {
		seed := base + uint64(i)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			runModel(t, seed, steps)
		})
	}
}

func runModel(t *testing.T, seed uint64, steps int) {
	ctx := context.Background()
	m := &model{t: t, e: newEnvOpt(t, fastSync), r: rand.New(rand.NewPCG(seed, seed^0x5e55)), seed: seed,
		byID: map[string]*mAdm{}, claimed: map[string]int{}}
	for i := range 5 {
		s := &mSess{id: fmt.Sprintf("sess-%d", i), byInput: map[string]*mAdm{}, nextSeq: 1}
		m.e.session(s.id)
		m.sess = append(m.sess, s)
	}
	type weighted struct {
		w  int
		fn func(s *mSess) *mAdm // returns the admission it touched, if any
	}
	wrongGen := func(a *mAdm) int64 {
		switch m.pick(3) {
		case 0:
			return a.gen + 1
		case 1:
			return a.gen - 1 // an older generation: the previous turn's
		}
		return 0
	}
	busyOf := func(s *mSess) bool {
		for _, a := range s.adms {
			if a.status != admission.StatusTerminal {
				return true
			}
		}
		return false
	}
	hostOf := func(s *mSess, st admission.Status) *mAdm {
		for _, a := range s.adms {
			if a.status == st && !a.isSteer() {
				return a
			}
		}
		return nil
	}
	admitNew := func(s *mSess) *mAdm {
		m.nextIn++
		in := fmt.Sprintf("in-%d", m.nextIn)
		text := fmt.Sprintf("text %d %x", m.nextIn, m.r.Uint32())
		atCap := m.pick(3) == 0
		whenBusy := []protocol.WhenBusy{"", protocol.WhenBusyQueue, protocol.WhenBusySteer, protocol.WhenBusySteer,
			protocol.WhenBusyInterrupt, protocol.WhenBusyReject}[m.pick(6)]
		busy := busyOf(s)
		running := hostOf(s, admission.StatusStarted)
		res, err := m.e.q.AdmitWith(ctx, admission.AdmitRequest{SessionID: s.id, InputID: in, Text: text, WhenBusy: whenBusy}, func() bool { return atCap })
		rec := res.Receipt
		if whenBusy == protocol.WhenBusyReject && busy {
			m.expectErr(err, admission.ErrSessionBusy)
			if n := m.e.count(`SELECT COUNT(*) FROM session_admissions WHERE request_id = ?`, in); n != 0 {
				m.fatalf("a rejected input was stored")
			}
			return nil
		}
		if err != nil {
			m.fatalf("Admit: %v", err)
		}
		a := &mAdm{id: rec.AdmissionID, input: in, text: text, origText: text, sess: s.id, seq: s.nextSeq, status: admission.StatusQueued,
			delivery: protocol.DeliveryQueue}
		if busy && whenBusy == protocol.WhenBusySteer {
			a.delivery = protocol.DeliverySteer
		}
		if busy && whenBusy == protocol.WhenBusyInterrupt {
			a.delivery = protocol.DeliveryInterrupt
		}
		if rec.Seq != a.seq || rec.Duplicate || rec.Status != admission.StatusQueued || rec.Outcome != nil || rec.ExecutionGeneration != nil ||
			rec.Delivery != a.delivery {
			m.fatalf("receipt %+v, want seq %d queued delivery %s, not duplicate", rec, a.seq, a.delivery)
		}
		wantInterrupt := int64(0)
		if a.delivery == protocol.DeliveryInterrupt && running != nil {
			wantInterrupt = running.gen
		}
		if res.Interrupt != wantInterrupt {
			m.fatalf("admit asked to interrupt generation %d, want %d", res.Interrupt, wantInterrupt)
		}
		if wantInterrupt != 0 {
			s.interruptGen = wantInterrupt
		}
		if m.byID[a.id] != nil {
			m.fatalf("admission id %s reused", a.id)
		}
		switch a.delivery {
		case protocol.DeliveryInterrupt:
			s.queue = slices.Insert(s.queue, 0, a)
		case protocol.DeliverySteer:
			at := slices.IndexFunc(s.queue, func(b *mAdm) bool { return b.delivery == protocol.DeliveryQueue })
			if at < 0 {
				at = len(s.queue)
			}
			s.queue = slices.Insert(s.queue, at, a)
		default:
			s.queue = append(s.queue, a)
		}
		s.adms = append(s.adms, a)
		s.byInput[in] = a
		m.byID[a.id] = a
		s.nextSeq++
		s.events++
		if want := s.waitReason(a, atCap); rec.Reason != want {
			m.fatalf("reason %q, want %q", rec.Reason, want)
		}
		return a
	}
	randomAdm := func(s *mSess) *mAdm {
		if len(s.adms) == 0 {
			return nil
		}
		// Bias towards the recent end, where the non-terminal rows are.
		n := len(s.adms)
		if m.pick(4) > 0 && n > 6 {
			return s.adms[n-1-m.pick(6)]
		}
		return s.adms[m.pick(n)]
	}
	admitDup := func(s *mSess) *mAdm {
		a := randomAdm(s)
		if a == nil {
			return admitNew(s)
		}
		other := m.pick(4) == 0
		text := a.text
		if m.pick(2) == 0 {
			text = a.origText // the original, or the text after prompt.update: both are duplicates
		}
		if other {
			text += " (other)"
		}
		atCap := m.pick(3) == 0
		whenBusy := []protocol.WhenBusy{"", protocol.WhenBusySteer, protocol.WhenBusyInterrupt, protocol.WhenBusyReject}[m.pick(4)]
		rec, err := m.e.q.Admit(ctx, admission.AdmitRequest{SessionID: s.id, InputID: a.input, Text: text, WhenBusy: whenBusy}, func() bool { return atCap })
		switch {
		case other:
			m.expectErr(err, admission.ErrConflict)
		case a.outcome == string(admission.OutcomeCancelled):
			m.expectErr(err, admission.ErrCancelled)
		case err != nil:
			m.fatalf("duplicate Admit: %v", err)
		default:
			var want protocol.WaitReason
			if a.status == admission.StatusQueued {
				want = s.waitReason(a, atCap)
			}
			if rec.AdmissionID != a.id || !rec.Duplicate || rec.Seq != a.seq || rec.Status != a.status || rec.Reason != want {
				m.fatalf("duplicate receipt %+v, want %s seq %d %s reason %q", rec, a.id, a.seq, a.status, want)
			}
		}
		return a
	}
	admitMissing := func(*mSess) *mAdm {
		_, err := m.e.q.Admit(ctx, admission.AdmitRequest{SessionID: "no-such-session", InputID: "x", Text: "x"}, nil)
		m.expectErr(err, admission.ErrSessionNotFound)
		if n := m.e.count(`SELECT COUNT(*) FROM session_admissions WHERE target_session_id = 'no-such-session'`); n != 0 {
			m.fatalf("admission stored for a missing session")
		}
		return nil
	}
	claim := func(s *mSess) *mAdm {
		got, err := m.e.q.Claim(ctx, s.id)
		switch {
		case hostOf(s, admission.StatusStarted) != nil:
			m.expectErr(err, admission.ErrSessionBusy)
			return nil
		case len(s.withStatus(admission.StatusUnknown)) > 0:
			m.expectErr(err, admission.ErrUnknownExecution)
			return nil
		}
		if len(s.queue) == 0 {
			m.expectErr(err, admission.ErrNothingQueued)
			return nil
		}
		if err != nil {
			m.fatalf("Claim: %v", err)
		}
		a := s.queue[0]
		if a.claimed {
			m.fatalf("admission %s claimed twice", a.id)
		}
		s.queue = s.queue[1:]
		s.gen++
		a.status, a.gen, a.epoch, a.claimed = admission.StatusStarted, s.gen, m.e.epoch, true
		s.events += 2
		s.claimCount++
		m.claimed[a.id]++
		if got.AdmissionID != a.id {
			m.fatalf("claimed %s (seq %d), want the FIFO head %s (seq %d)", got.AdmissionID, got.Seq, a.id, a.seq)
		}
		if err := m.eqRow(a, got); err != nil {
			m.fatalf("claim returned %v", err)
		}
		if n := m.e.count(`SELECT COUNT(*) FROM messages WHERE admission_id = ? AND role = 'user' AND content = ?`, a.id, a.text); n != 1 {
			m.fatalf("claim of %s appended %d user messages", a.id, n)
		}
		if n := m.e.count(`SELECT COUNT(*) FROM messages WHERE session_id = ? AND role = 'user'`, s.id); n != s.claimCount {
			m.fatalf("session %s has %d user messages for %d claims and steers", s.id, n, s.claimCount)
		}
		return a
	}
	// take is the model request boundary of the running turn: every queued
	// steer is taken into it, in queue order, in a transaction fenced on
	// the turn's execution (sometimes a stale one, which takes nothing).
	take := func(s *mSess) *mAdm {
		host := hostOf(s, admission.StatusStarted)
		if host == nil {
			host = hostOf(s, admission.StatusUnknown)
		}
		if host == nil {
			host = randomAdm(s)
		}
		if host == nil {
			return nil
		}
		x := admission.Execution{SessionID: s.id, AdmissionID: host.id, Generation: host.gen, Daemon: host.epoch}
		live := host.status == admission.StatusStarted && !host.isSteer() && host.epoch == m.e.epoch
		if m.pick(5) == 0 {
			x.Generation = wrongGen(host)
			live = live && x.Generation == host.gen
		}
		var taken []admission.Admission
		err := m.e.db.InTx(ctx, func(tx *store.Tx) error {
			if err := x.Check(tx); err != nil {
				return err
			}
			var err error
			taken, _, err = admission.TakeSteers(tx, x)
			return err
		})
		if !live {
			m.expectErr(err, admission.ErrFenced)
			return host
		}
		if err != nil {
			m.fatalf("TakeSteers: %v", err)
		}
		var want []*mAdm
		rest := s.queue[:0:0]
		for _, a := range s.queue {
			if a.delivery == protocol.DeliverySteer && s.interruptGen != host.gen {
				want = append(want, a)
			} else {
				rest = append(rest, a)
			}
		}
		s.queue = rest
		if len(taken) != len(want) {
			m.fatalf("took %d steers, want %d", len(taken), len(want))
		}
		for i, a := range want {
			if a.claimed {
				m.fatalf("steer %s taken twice", a.id)
			}
			a.status, a.gen, a.epoch, a.claimed, a.steeredInto = admission.StatusStarted, host.gen, host.epoch, true, host.id
			s.events++
			s.claimCount++
			m.claimed[a.id]++
			if taken[i].AdmissionID != a.id {
				m.fatalf("steer %d taken is %s, want %s (queue order)", i, taken[i].AdmissionID, a.id)
			}
			if err := m.eqRow(a, taken[i]); err != nil {
				m.fatalf("TakeSteers returned %v", err)
			}
		}
		return host
	}
	// steersOf are the steers taken into host.
	steersOf := func(s *mSess, host *mAdm) []*mAdm {
		var out []*mAdm
		for _, a := range s.adms {
			if a.steeredInto == host.id && a.status != admission.StatusTerminal {
				out = append(out, a)
			}
		}
		return out
	}
	settle := func(s *mSess, outcome admission.Outcome, right bool) *mAdm {
		var a *mAdm
		if st := s.withStatus(admission.StatusStarted); len(st) > 0 && m.pick(5) > 0 {
			a = st[0]
		} else if a = randomAdm(s); a == nil {
			return nil
		}
		gen := a.gen
		if !right {
			gen = wrongGen(a)
		}
		errText := ""
		if outcome == admission.OutcomeFailed {
			errText = fmt.Sprintf("failure %d", m.step)
		}
		arg := admission.Admission{AdmissionID: a.id, SessionID: s.id}
		arg.ExecutionGeneration.Int64, arg.ExecutionGeneration.Valid = gen, gen != 0
		got, err := m.e.q.Settle(ctx, arg, outcome, errText, nil)
		switch {
		case outcome == admission.OutcomeCancelled:
			m.expectErr(err, admission.ErrIllegalTransition)
		case gen > 0 && a.status == admission.StatusStarted && a.isSteer():
			m.expectErr(err, admission.ErrIllegalTransition)
		case a.status != admission.StatusStarted || gen != a.gen || gen == 0:
			m.expectErr(err, admission.ErrStaleGeneration)
		case err != nil:
			m.fatalf("Settle: %v", err)
		default:
			for _, st := range steersOf(s, a) {
				st.status, st.outcome, st.errText = admission.StatusTerminal, string(outcome), errText
				s.events++
			}
			a.status, a.outcome, a.errText = admission.StatusTerminal, string(outcome), errText
			s.events += 2
			if err := m.eqRow(a, got); err != nil {
				m.fatalf("Settle returned %v", err)
			}
		}
		return a
	}
	cancel := func(s *mSess) *mAdm {
		a := randomAdm(s)
		if q := s.withStatus(admission.StatusQueued); len(q) > 0 && m.pick(2) == 0 {
			a = q[m.pick(len(q))]
		}
		if a == nil {
			return nil
		}
		got, err := m.e.q.Cancel(ctx, s.id, a.id)
		switch a.status {
		case admission.StatusQueued:
			if err != nil {
				m.fatalf("Cancel: %v", err)
			}
			a.status, a.outcome = admission.StatusTerminal, string(admission.OutcomeCancelled)
			s.queue = slices.DeleteFunc(s.queue, func(b *mAdm) bool { return b == a })
			s.events++
			if err := m.eqRow(a, got); err != nil {
				m.fatalf("Cancel returned %v", err)
			}
		case admission.StatusUnknown:
			m.expectErr(err, admission.ErrUnknownExecution)
		default:
			m.expectErr(err, admission.ErrNotQueued)
		}
		return a
	}
	resolve := func(s *mSess) *mAdm {
		var a *mAdm
		if u := s.withStatus(admission.StatusUnknown); len(u) > 0 && m.pick(10) > 0 {
			a = u[0]
		} else if a = randomAdm(s); a == nil {
			return nil
		}
		gen := a.gen
		if m.pick(4) == 0 {
			gen = wrongGen(a)
		}
		got, err := m.e.q.ResolveUnknown(ctx, s.id, a.id, gen, nil)
		if a.status != admission.StatusUnknown || gen != a.gen || gen <= 0 {
			m.expectErr(err, admission.ErrStaleGeneration)
			return a
		}
		if err != nil {
			m.fatalf("ResolveUnknown: %v", err)
		}
		// A steer is closed with the turn it was taken into, whichever
		// of them the operator names.
		host := a
		if a.isSteer() {
			host = m.byID[a.steeredInto]
		}
		for _, st := range steersOf(s, host) {
			st.status, st.outcome = admission.StatusTerminal, string(admission.OutcomeInterrupted)
			s.events++
		}
		host.status, host.outcome = admission.StatusTerminal, string(admission.OutcomeInterrupted)
		s.events += 2
		if err := m.eqRow(a, got); err != nil {
			m.fatalf("ResolveUnknown returned %v", err)
		}
		return a
	}
	crash := func(*mSess) *mAdm {
		res := m.e.crash()
		var wantUnknown, gotUnknown, wantSess, gotSess []string
		for _, s := range m.sess {
			for _, a := range s.withStatus(admission.StatusStarted) {
				a.status = admission.StatusUnknown
				s.events++
				wantUnknown = append(wantUnknown, a.id)
			}
			if len(s.withStatus(admission.StatusQueued)) > 0 {
				wantSess = append(wantSess, s.id)
			}
		}
		for _, a := range res.Unknown {
			gotUnknown = append(gotUnknown, a.AdmissionID)
			if err := m.eqRow(m.byID[a.AdmissionID], a); err != nil {
				m.fatalf("Recover returned %v", err)
			}
		}
		gotSess = res.Sessions
		slices.Sort(wantUnknown)
		slices.Sort(gotUnknown)
		slices.Sort(gotSess)
		if !slices.Equal(wantUnknown, gotUnknown) || !slices.Equal(wantSess, gotSess) {
			m.fatalf("Recover: unknown %v sessions %v, want %v and %v", gotUnknown, gotSess, wantUnknown, wantSess)
		}
		for _, s := range m.sess {
			m.checkSession(s)
		}
		return nil
	}
	update := func(s *mSess) *mAdm {
		a := randomAdm(s)
		if len(s.queue) > 0 && m.pick(3) > 0 {
			a = s.queue[m.pick(len(s.queue))]
		}
		if a == nil {
			return nil
		}
		text := fmt.Sprintf("updated %d %x", m.step, m.r.Uint32())
		got, err := m.e.q.Update(ctx, s.id, a.id, text, nil)
		switch a.status {
		case admission.StatusQueued:
			if err != nil {
				m.fatalf("Update: %v", err)
			}
			a.text = text
			s.events++
			if err := m.eqRow(a, got); err != nil {
				m.fatalf("Update returned %v", err)
			}
		case admission.StatusUnknown:
			m.expectErr(err, admission.ErrUnknownExecution)
		default:
			m.expectErr(err, admission.ErrNotQueued)
		}
		return a
	}
	move := func(s *mSess) *mAdm {
		a := randomAdm(s)
		if len(s.queue) > 0 && m.pick(4) > 0 {
			a = s.queue[m.pick(len(s.queue))]
		}
		if a == nil {
			return nil
		}
		var before *mAdm
		switch {
		case m.pick(3) == 0:
		case len(s.queue) > 0 && m.pick(5) > 0:
			before = s.queue[m.pick(len(s.queue))]
		default:
			before = randomAdm(s)
		}
		if before == a {
			before = nil
		}
		beforeID := ""
		if before != nil {
			beforeID = before.id
		}
		if m.pick(30) == 0 {
			beforeID = "adm_missing"
		}
		order, err := m.e.q.Move(ctx, s.id, a.id, beforeID)
		refusal := func(b *mAdm) error {
			switch b.status {
			case admission.StatusQueued:
				return nil
			case admission.StatusUnknown:
				return admission.ErrUnknownExecution
			}
			return admission.ErrNotQueued
		}
		if want := refusal(a); want != nil {
			m.expectErr(err, want)
			return a
		}
		if beforeID == "adm_missing" {
			m.expectErr(err, admission.ErrNotFound)
			return a
		}
		if before != nil {
			if want := refusal(before); want != nil {
				m.expectErr(err, want)
				return a
			}
		}
		if err != nil {
			m.fatalf("Move: %v", err)
		}
		s.queue = slices.DeleteFunc(s.queue, func(b *mAdm) bool { return b == a })
		at := 0
		if before != nil {
			at = slices.Index(s.queue, before)
		}
		s.queue = slices.Insert(s.queue, at, a)
		s.events++
		var want []string
		for _, b := range s.queue {
			want = append(want, b.id)
		}
		if !slices.Equal(order, want) {
			m.fatalf("Move returned order %v, model %v", order, want)
		}
		return a
	}
	outcomes := []admission.Outcome{admission.OutcomeCompleted, admission.OutcomeFailed, admission.OutcomeInterrupted}
	ops := map[string]weighted{
		"admit":         {15, admitNew},
		"admit-dup":     {6, admitDup},
		"admit-missing": {1, admitMissing},
		"claim":         {22, claim},
		"settle": {14, func(s *mSess) *mAdm {
			return settle(s, outcomes[m.pick(len(outcomes))], m.pick(6) > 0)
		}},
		"settle-cancelled": {1, func(s *mSess) *mAdm { return settle(s, admission.OutcomeCancelled, true) }},
		"cancel":           {8, cancel},
		"interrupt": {7, func(s *mSess) *mAdm {
			return settle(s, admission.OutcomeInterrupted, m.pick(3) > 0)
		}},
		"crash":   {2, crash},
		"resolve": {10, resolve},
		"take":    {8, take},
		"update":  {6, update},
		"move":    {7, move},
	}
	names := make([]string, 0, len(ops))
	total := 0
	for n, o := range ops {
		names = append(names, n)
		total += o.w
	}
	slices.Sort(names) // map order must not leak into the choice
	counts := map[string]int{}
	for m.step = 0; m.step < steps; m.step++ {
		x := m.pick(total)
		var name string
		for _, n := range names {
			if x -= ops[n].w; x < 0 {
				name = n
				break
			}
		}
		s := m.sess[m.pick(len(m.sess))]
		m.op = name + "(" + s.id + ")"
		counts[name]++
		if touched := ops[name].fn(s); touched != nil {
			m.checkRow(touched)
		}
		m.checkSession(s)
		if m.step%400 == 399 {
			m.checkAll()
		}
	}
	m.checkAll()
	var started, unknown, terminal, queued int
	for _, a := range m.byID {
		switch a.status {
		case admission.StatusStarted:
			started++
		case admission.StatusUnknown:
			unknown++
		case admission.StatusTerminal:
			terminal++
		default:
			queued++
		}
	}
	t.Logf("seed %d: %d steps %v; %d admissions (%d queued, %d started, %d unknown, %d terminal), %d claims, final epoch %d",
		seed, steps, counts, len(m.byID), queued, started, unknown, terminal, len(m.claimed), m.e.epoch)
}
