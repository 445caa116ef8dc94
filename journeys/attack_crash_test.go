package journeys

// Adversarial regression: SIGKILL / SIGTERM at a random moment of a burst of
// concurrent prompt.submit calls from several clients, with repeated input
// ids. The moment is a random number of acknowledgements (seeded, logged:
// replay with ATTACK_SEED), and every round holds one turn in the model so
// that the stop always finds a started admission.

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/fixtures"
)

// atkKey names one input: its session and input id.
type atkKey struct{ session, input string }

func (k atkKey) text() string { return "msg " + k.session + " " + k.input }

func TestAttackCrashBurstSIGKILL(t *testing.T) { atkCrashBurst(t, true) }
func TestAttackCrashBurstSIGTERM(t *testing.T) { atkCrashBurst(t, false) }

func atkCrashBurst(t *testing.T, crash bool) {
	rng := atkSeed(t)
	const rounds, nSessions, nClients, perClient = 4, 3, 4, 15
	how := map[bool]string{true: "SIGKILL", false: "SIGTERM"}[crash]

	m := fixtures.NewFakeModel(t)
	m.Default(fixtures.Reply{Text: "fine", Delay: 5 * time.Millisecond})
	anchors := make([]*fixtures.Gate, rounds)
	for i := range anchors {
		anchors[i] = fixtures.NewGate() // never released: the turn is in the model when the daemon stops
		m.On(fmt.Sprintf("anchor %d", i), fixtures.Reply{Text: "never", Gate: anchors[i]})
	}
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "limits: {max_concurrent_turns: 2}")})
	c := d.Dial(t)
	var sessions []string
	for range nSessions {
		sessions = append(sessions, createSession(t, c, map[string]any{}).SessionID)
	}

	var mu sync.Mutex
	acked := map[atkKey]string{} // acknowledged input -> its admission id
	fresh := map[atkKey]int{}    // receipts with duplicate=false
	var used []atkKey
	nextID := 0
	// ack records a receipt; it is called from the burst goroutines.
	ack := func(round int, k atkKey, r receipt) {
		mu.Lock()
		defer mu.Unlock()
		if r.SessionID != k.session || r.InputID != k.input {
			t.Errorf("round %d: receipt for %v names %s/%s", round, k, r.SessionID, r.InputID)
		}
		if prev, ok := acked[k]; ok && prev != r.AdmissionID {
			t.Errorf("round %d: %v acknowledged as %s and as %s", round, k, prev, r.AdmissionID)
		}
		acked[k] = r.AdmissionID
		if !r.Duplicate {
			if fresh[k]++; fresh[k] > 1 {
				t.Errorf("round %d: %v acknowledged %d times as new (duplicate=false)", round, k, fresh[k])
			}
		}
	}
	// readRows reads every admission of the test's sessions, by id, and
	// checks that no input was admitted twice.
	readRows := func() map[string]fixtures.AdmissionRow {
		db := fixtures.OpenStoreReadOnly(t, d.Home)
		defer db.Close()
		rows := map[string]fixtures.AdmissionRow{}
		perKey := map[atkKey]int{}
		for _, s := range sessions {
			for _, r := range fixtures.Admissions(t, db, s) {
				rows[r.AdmissionID] = r
				if perKey[atkKey{s, r.InputID}]++; perKey[atkKey{s, r.InputID}] > 1 {
					t.Errorf("input %s of %s admitted twice", r.InputID, s)
				}
			}
		}
		return rows
	}
	allTerminal := func(what string) {
		t.Helper()
		db := fixtures.OpenStoreReadOnly(t, d.Home)
		defer db.Close()
		for _, s := range sessions {
			fixtures.Eventually(t, wait, what+": every admission of "+s+" terminal", func() bool {
				for _, r := range fixtures.Admissions(t, db, s) {
					if r.Status != "terminal" {
						return false
					}
				}
				return true
			})
		}
	}

	for round := range rounds {
		// The anchor: a turn parked in the model while the burst runs.
		anchorSession := sessions[round%nSessions]
		anchorKey := atkKey{anchorSession, fmt.Sprintf("anchor-%d", round)}
		ra := submit(t, c, anchorSession, anchorKey.input, fmt.Sprintf("anchor %d", round))
		ack(round, anchorKey, ra)
		atkWaitParked(t, anchors[round], fmt.Sprintf("anchor %d", round), func() string {
			db := fixtures.OpenStoreReadOnly(t, d.Home)
			defer db.Close()
			var running int
			c.Call(ctxT(t), "daemon.info", nil, &struct {
				RunningTurns *int `json:"running_turns"`
			}{&running})
			return fmt.Sprintf("receipt %+v; running_turns %d; admissions of the session: %+v; model requests in flight %d",
				ra, running, fixtures.Admissions(t, db, anchorSession), m.InFlight())
		})

		// Plans from the seeded generator: a quarter repeat an earlier input.
		plans := make([][]atkKey, nClients)
		for ci := range plans {
			for range perClient {
				var k atkKey
				if len(used) > 0 && rng.Intn(4) == 0 {
					k = used[rng.Intn(len(used))]
				} else {
					nextID++
					k = atkKey{sessions[rng.Intn(nSessions)], fmt.Sprintf("in-%d", nextID)}
					used = append(used, k)
				}
				plans[ci] = append(plans[ci], k)
			}
		}
		killAt := int64(rng.Intn(nClients*perClient + 1)) // stop after this many acknowledgements
		clients := make([]*fixtures.Client, nClients)
		for i := range clients {
			clients[i] = d.Dial(t)
		}
		var acks atomic.Int64
		killNow := make(chan struct{})
		var killOnce sync.Once
		if killAt == 0 {
			close(killNow)
		}
		var wg sync.WaitGroup
		for ci := range nClients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, k := range plans[ci] {
					var r receipt
					err := atkCall(clients[ci], "prompt.submit", map[string]any{"session_id": k.session, "input_id": k.input, "text": k.text()}, &r)
					if err != nil {
						switch reason := fixtures.ErrorReason(err); reason {
						case "":
							return // the connection is gone
						case "draining":
							if crash {
								t.Errorf("round %d: %v refused as draining before a SIGKILL", round, k)
							}
							continue
						default:
							t.Errorf("round %d: prompt.submit %v: %v", round, k, err)
							continue
						}
					}
					ack(round, k, r)
					if acks.Add(1) == killAt {
						killOnce.Do(func() { close(killNow) })
					}
				}
			}()
		}
		burstDone := make(chan struct{})
		go func() { wg.Wait(); close(burstDone) }()
		select {
		case <-killNow:
		case <-burstDone:
		}
		if crash {
			d.SIGKILL(t)
		} else if code := d.SIGTERM(t); code != 0 {
			t.Errorf("round %d: exit code %d after SIGTERM", round, code)
		}
		<-burstDone
		for _, cl := range clients {
			cl.Close()
		}

		// The store exactly as the stopped process left it.
		before := readRows()
		mu.Lock()
		for k, aid := range acked {
			if r, ok := before[aid]; !ok || r.InputID != k.input || r.SessionID != k.session {
				t.Errorf("round %d: acknowledged %v (%s) is not in session_admissions after %s (row %+v)", round, k, aid, how, r)
			}
		}
		mu.Unlock()
		nStarted := 0
		for _, r := range before {
			if r.Status == "started" {
				nStarted++
				if !crash {
					t.Errorf("round %d: after SIGTERM %s (%s) is still started", round, r.AdmissionID, r.InputID)
				}
			}
		}
		anchorRow := before[ra.AdmissionID]
		if crash && anchorRow.Status != "started" {
			t.Errorf("round %d: the anchor held in the model is %s/%s after SIGKILL, want started", round, anchorRow.Status, anchorRow.Outcome.String)
		}
		if !crash {
			wantRow(t, anchorRow, "terminal", "interrupted")
		}

		d.Restart(t)
		c = d.Dial(t)
		after := readRows()
		held := map[string]bool{}
		for id, r := range after {
			b := before[id]
			switch {
			case crash && b.Status == "started" && r.Status != "unknown":
				t.Errorf("round %d: %s was started at the SIGKILL and is %s/%s after the boot, want unknown", round, id, r.Status, r.Outcome.String)
			case !crash && r.Status == "unknown":
				t.Errorf("round %d: %s is unknown after a SIGTERM", round, id)
			}
			if r.Status == "unknown" {
				held[r.SessionID] = true
			}
		}
		t.Logf("round %d: %s after %d/%d acknowledgements: %d started, %d admissions; sessions held by an unknown: %d",
			round, how, min(killAt, acks.Load()), nClients*perClient, nStarted, len(before), len(held))

		if crash {
			// The sessions that hold no unknown drain by themselves, and a
			// fresh session runs a turn: the scheduler is past the boot.
			probe := createSession(t, c, map[string]any{})
			resume(t, c, probe.SessionID)
			rp := submit(t, c, probe.SessionID, "probe", fmt.Sprintf("probe %d", round))
			if out := waitTurn(t, c, rp.AdmissionID); out != "completed" {
				t.Fatalf("round %d: probe turn %s", round, out)
			}
			db := fixtures.OpenStoreReadOnly(t, d.Home)
			for _, s := range sessions {
				if held[s] {
					continue
				}
				fixtures.Eventually(t, wait, "a session without an unknown to drain", func() bool {
					for _, r := range fixtures.Admissions(t, db, s) {
						if r.Status != "terminal" {
							return false
						}
					}
					return true
				})
			}
			// Nothing behind an unknown has moved.
			for s := range held {
				for _, r := range fixtures.Admissions(t, db, s) {
					if b := before[r.AdmissionID]; b.Status == "queued" && r.Status != "queued" {
						t.Errorf("round %d: %s was queued behind an unknown and is now %s/%s", round, r.AdmissionID, r.Status, r.Outcome.String)
					}
					if r.Status == "started" {
						t.Errorf("round %d: %s started although its session holds an unknown", round, r.AdmissionID)
					}
				}
				for _, p := range resume(t, c, s).Pending {
					if p.Status == "queued" && p.Reason != "unknown" {
						t.Errorf("round %d: %s waits with reason %q behind an unknown, want \"unknown\"", round, p.AdmissionID, p.Reason)
					}
				}
			}
			// The operator resolves every unknown; then the FIFOs move on.
			for s := range held {
				for _, r := range fixtures.Admissions(t, db, s) {
					if r.Status == "unknown" {
						resolveUnknownAdmission(t, c, s, r.AdmissionID, r.ExecutionGeneration.Int64)
					}
				}
			}
			db.Close()
		}
		// After SIGTERM nothing needs a decision: the queues resume by
		// themselves; after SIGKILL they resume once resolved.
		allTerminal(fmt.Sprintf("round %d after the restart", round))
	}

	// Every input reached the model at most once, and a completed one
	// exactly once.
	counts := map[string]int{}
	for _, r := range m.Requests() {
		counts[r.LastUserText()]++
	}
	final := readRows()
	for _, r := range final {
		k := atkKey{r.SessionID, r.InputID}
		text := k.text()
		if n, ok := strings.CutPrefix(r.InputID, "anchor-"); ok {
			text = "anchor " + n
			if counts[text] != 1 {
				t.Errorf("anchor %s reached the model %d times, want once", r.InputID, counts[text])
			}
			if r.Outcome.String != "interrupted" {
				t.Errorf("anchor %s settled %s, want interrupted", r.InputID, r.Outcome.String)
			}
		}
		n := counts[text]
		switch {
		case n > 1:
			t.Errorf("input %s (%s/%s) reached the model %d times", r.InputID, r.Status, r.Outcome.String, n)
		case r.Outcome.String == "completed" && n != 1:
			t.Errorf("completed input %s reached the model %d times", r.InputID, n)
		case r.Outcome.String == "cancelled" && n != 0:
			t.Errorf("cancelled input %s reached the model", r.InputID)
		}
	}
	mu.Lock()
	t.Logf("%d inputs acknowledged, %d admissions, %d model requests", len(acked), len(final), len(m.Requests()))
	mu.Unlock()
}
