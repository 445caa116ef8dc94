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
	claimed               bool
}

type mSess struct {
	id         string
	adms       []*mAdm // seq order
	byInput    map[string]*mAdm
	gen        int64
	nextSeq    int64
	events     int64
	lastClaim  int64 // seq of the last claim: claims happen in seq order
	claimCount int
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

// waitReason is the documented rule for a queued receipt's reason.
func (s *mSess) waitReason(a *mAdm, atCap bool) protocol.WaitReason {
	var unknown, started, ahead bool
	for _, b := range s.adms {
		if b.seq >= a.seq || b.status == admission.StatusTerminal {
			continue
		}
		ahead = true
		unknown = unknown || b.status == admission.StatusUnknown
		started = started || b.status == admission.StatusStarted
	}
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
		switch a.Status {
		case admission.StatusStarted:
			started++
		case admission.StatusUnknown:
			unknown++
		}
	}
	if started+unknown > 1 {
		m.fatalf("session %s has %d started and %d unknown admissions", s.id, started, unknown)
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
	admitNew := func(s *mSess) *mAdm {
		m.nextIn++
		in := fmt.Sprintf("in-%d", m.nextIn)
		text := fmt.Sprintf("text %d %x", m.nextIn, m.r.Uint32())
		atCap := m.pick(3) == 0
		rec, err := m.e.q.Admit(ctx, admission.AdmitRequest{SessionID: s.id, InputID: in, Text: text}, func() bool { return atCap })
		if err != nil {
			m.fatalf("Admit: %v", err)
		}
		a := &mAdm{id: rec.AdmissionID, input: in, text: text, sess: s.id, seq: s.nextSeq, status: admission.StatusQueued}
		if rec.Seq != a.seq || rec.Duplicate || rec.Status != admission.StatusQueued || rec.Outcome != nil || rec.ExecutionGeneration != nil {
			m.fatalf("receipt %+v, want seq %d queued, not duplicate", rec, a.seq)
		}
		if m.byID[a.id] != nil {
			m.fatalf("admission id %s reused", a.id)
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
		if other {
			text += " (edited)"
		}
		atCap := m.pick(3) == 0
		rec, err := m.e.q.Admit(ctx, admission.AdmitRequest{SessionID: s.id, InputID: a.input, Text: text}, func() bool { return atCap })
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
		case len(s.withStatus(admission.StatusStarted)) > 0:
			m.expectErr(err, admission.ErrSessionBusy)
			return nil
		case len(s.withStatus(admission.StatusUnknown)) > 0:
			m.expectErr(err, admission.ErrUnknownExecution)
			return nil
		}
		queued := s.withStatus(admission.StatusQueued)
		if len(queued) == 0 {
			m.expectErr(err, admission.ErrNothingQueued)
			return nil
		}
		if err != nil {
			m.fatalf("Claim: %v", err)
		}
		a := queued[0]
		if a.claimed {
			m.fatalf("admission %s claimed twice", a.id)
		}
		if a.seq <= s.lastClaim {
			m.fatalf("claim of seq %d after seq %d: FIFO order broken", a.seq, s.lastClaim)
		}
		s.lastClaim = a.seq
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
			m.fatalf("session %s has %d user messages for %d claims", s.id, n, s.claimCount)
		}
		return a
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
		case a.status != admission.StatusStarted || gen != a.gen || gen == 0:
			m.expectErr(err, admission.ErrStaleGeneration)
		case err != nil:
			m.fatalf("Settle: %v", err)
		default:
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
		a.status, a.outcome = admission.StatusTerminal, string(admission.OutcomeInterrupted)
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
