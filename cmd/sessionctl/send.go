package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
)

// newInputID returns a fresh idempotency key for prompt.submit:
// PREFIX-UNIXMILLI-RANDOM, within [A-Za-z0-9._:-]{1,128}.
func newInputID(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", prefix, time.Now().UnixMilli(), hex.EncodeToString(b[:]))
}

// validInputID mirrors the daemon's input_id rule (PROTOCOL §4,
// prompt.submit), so a bad --input-id is a usage error (exit 2).
func validInputID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._:-", r)) {
			return false
		}
	}
	return true
}

// sendResult is the JSON of `send --json`.
type sendResult struct {
	SessionID   string            `json:"session_id"`
	InputID     string            `json:"input_id"`
	AdmissionID string            `json:"admission_id"`
	Outcome     string            `json:"outcome"` // completed | failed | interrupted | cancelled | unknown | pending (stopped waiting first)
	Error       string            `json:"error,omitempty"`
	Reply       string            `json:"reply"`
	Receipt     *protocol.Receipt `json:"receipt"`
}

func (a *app) sendCommand() *cobra.Command {
	var inputID, whenBusy string
	var steer bool
	var reconnectFor time.Duration
	cmd := &cobra.Command{
		Use:   "send SESSION TEXT",
		Short: "Submit one input, wait for its turn and print the reply",
		Long: `Submits TEXT to the session ("-" reads it from stdin), waits until that
input's turn has settled and prints the assistant's reply on stdout. It
subscribes to the session before submitting, so no event is missed.

Exit 0 when the turn completed; 1 when it failed, was interrupted or
cancelled (the reason goes to stderr), or when the daemon crashed while it
ran (the admission is then unknown: see resolve); 5 when --timeout passed
first (the turn goes on in the daemon). With --json, stdout gets one object
{session_id, input_id, admission_id, outcome, error?, reply, receipt} in
every case that got a receipt; outcome "pending" means sessionctl stopped
waiting first (--timeout, Ctrl-C); reply is then the turn's last complete
assistant message so far, if any.

--input-id makes the submit idempotent across invocations: the same id with
the same text never runs twice, and a repeated send just waits for (or
reports) the original turn. Without it a fresh id is used. If the
connection drops while waiting, send reconnects (re-reading daemon.json, so
a restarted daemon is found), resumes after the last event it saw and
re-submits with the same input id, which is safe.

The turn runs in the daemon: interrupting sessionctl (Ctrl-C, --timeout)
stops waiting, not the turn. Approvals and clarifications the turn asks for
must be answered elsewhere (attach, approve, answer) or they time out; send
prints a note on stderr for each with the exact command to answer it.

While the session runs a turn, --when-busy says what the input does:
queue (the default: wait in the FIFO), steer (--steer: join the running
turn at its next model request; send then waits for that turn and prints
its reply), interrupt (stop the running turn and run this next) or reject
(refused with exit 1 and nothing stored).`,
		Example: `  sessionctl send "$S" "summarise README.md"
  git diff | sessionctl send "$S" -
  sessionctl send "$S" "run the tests" --input-id ci-build-1234 --json | jq -r .reply
  sessionctl send "$S" "long job" --timeout 10m; [ $? = 5 ] && echo "still running"
  sessionctl send "$S" "also run the tests" --steer`,
		Args: args(2, "SESSION TEXT"),
	}
	cmd.Flags().StringVar(&inputID, "input-id", "", "idempotency key, 1-128 characters of [A-Za-z0-9._:-] (default: a fresh one)")
	cmd.Flags().DurationVar(&a.timeout, "timeout", 0, "stop waiting after this long, exit 5 (0: wait until the turn settles)")
	cmd.Flags().DurationVar(&reconnectFor, "reconnect-timeout", time.Minute, "how long to keep reconnecting after the connection drops")
	cmd.Flags().StringVar(&whenBusy, "when-busy", "", "while a turn runs: queue | steer | interrupt | reject (default queue)")
	cmd.Flags().BoolVar(&steer, "steer", false, "short for --when-busy steer: add the input to the running turn")
	a.addJSONFlag(cmd)
	cmd.RunE = a.verb(true, func(ctx context.Context, cmd *cobra.Command, args []string) error {
		text := args[1]
		if text == "-" {
			b, err := io.ReadAll(a.stdin)
			if err != nil {
				return fail(exitFailed, "reading the input from stdin: %v", err)
			}
			text = string(b)
		}
		if text == "" {
			return usageError("send needs a non-empty TEXT")
		}
		if inputID == "" {
			inputID = newInputID("sessionctl")
		} else if !validInputID(inputID) {
			return usageError("--input-id %q: must be 1-128 characters of [A-Za-z0-9._:-]", inputID)
		}
		if steer {
			if whenBusy != "" && whenBusy != string(protocol.WhenBusySteer) {
				return usageError("--steer and --when-busy %s contradict each other", whenBusy)
			}
			whenBusy = string(protocol.WhenBusySteer)
		}
		switch protocol.WhenBusy(whenBusy) {
		case "", protocol.WhenBusyQueue, protocol.WhenBusySteer, protocol.WhenBusyInterrupt, protocol.WhenBusyReject:
		default:
			return usageError("--when-busy %q: must be queue, steer, interrupt or reject", whenBusy)
		}
		s := &sender{app: a, sessionID: args[0], inputID: inputID, text: text, reconnectFor: reconnectFor, whenBusy: protocol.WhenBusy(whenBusy)}
		return s.run(ctx)
	})
	return cmd
}

// sender is one `send`: submit, wait, reconnect.
type sender struct {
	app          *app
	sessionID    string
	inputID      string
	text         string
	reconnectFor time.Duration
	whenBusy     protocol.WhenBusy

	admissionID string
	// sessionView follows the admission (reduce.go, shared with attach):
	// its receipt, assistant messages, turn error and whether it finished.
	sessionView
	lastSeq int64           // -1 before the first snapshot
	warned  bool            // about waiting behind an unknown admission
	noted   map[string]bool // prompts of the turn already pointed out on stderr
}

// errLost means the connection ended before the turn settled.
var errLost = errors.New("connection lost")

func (s *sender) run(ctx context.Context) error {
	s.lastSeq = -1
	var lostAt time.Time
	var lastErr error
	backoff := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		c, _, err := s.app.connect(ctx, rpc.DialOptions{})
		if err == nil {
			if attempt > 0 {
				fmt.Fprintf(s.app.stderr, "sessionctl: reconnected; resuming after seq %d\n", s.lastSeq)
			}
			err = s.session(ctx, c)
			c.Close()
			if err == nil {
				return s.report()
			}
			if !errors.Is(err, errLost) {
				return s.explain(ctx, err)
			}
			fmt.Fprintf(s.app.stderr, "sessionctl: %s; reconnecting\n", describeClosed(c.Err()))
			lostAt, backoff = time.Now(), 100*time.Millisecond
		} else {
			if attempt == 0 || ctx.Err() != nil {
				return s.explain(ctx, err)
			}
			lastErr = err
			if time.Since(lostAt) > s.reconnectFor {
				return fail(exitUnreachable, "lost the daemon while waiting for input %s and could not reconnect within %v: %v", s.inputID, s.reconnectFor, oneLine(lastErr.Error()))
			}
		}
		select {
		case <-ctx.Done():
			return s.explain(ctx, ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// explain turns a context end into the right message.
func (s *sender) explain(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	if s.app.jsonOut && s.admissionID != "" {
		// Scripts get the admission id even when they stop waiting.
		s.app.printJSON(sendResult{SessionID: s.sessionID, InputID: s.inputID, AdmissionID: s.admissionID,
			Outcome: "pending", Reply: s.reply(), Receipt: s.receipt})
	}
	where := "the turn continues in the daemon"
	switch {
	case s.admissionID != "" && s.receipt != nil && s.receipt.Status == protocol.StatusQueued:
		// interrupt would stop whatever runs now, not this input.
		where = fmt.Sprintf("the input stays queued in the daemon (admission %s; withdraw it with `sessionctl cancel %s %s`)", s.admissionID, s.sessionID, s.admissionID)
	case s.admissionID != "":
		where = fmt.Sprintf("the turn continues in the daemon (admission %s; stop it with `sessionctl interrupt %s`)", s.admissionID, s.sessionID)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fail(exitTimeout, "gave up waiting after %v (--timeout); %s", s.app.timeout, where)
	}
	return fail(exitInterrupted, "stopped waiting; %s", where)
}

// session does one connection's work: subscribe (resume after the last
// seen event), submit idempotently, then follow events until the
// admission settles. It returns nil when finished, errLost when the
// connection ended first, or the error to report.
func (s *sender) session(ctx context.Context, c *rpc.Client) error {
	p := protocol.ResumeParams{SessionID: s.sessionID}
	if s.lastSeq >= 0 {
		p.AfterSeq = &s.lastSeq
	}
	var snap protocol.Snapshot
	if err := c.Call(ctx, protocol.MethodSessionResume, p, &snap); err != nil {
		return s.lostOr(c, err)
	}
	s.lastSeq = snap.LastSeq
	// Submit (again: the same input_id is idempotent) to learn the
	// admission and its status as of now.
	var r protocol.Receipt
	for {
		err := c.Call(ctx, protocol.MethodPromptSubmit, protocol.SubmitParams{SessionID: s.sessionID, InputID: s.inputID, Text: s.text, WhenBusy: s.whenBusy}, &r)
		if errors.Is(err, protocol.ErrOverloaded) {
			select {
			case <-time.After(200 * time.Millisecond):
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if errors.Is(err, protocol.ErrDraining) {
			// The daemon is stopping: wait for it to close the
			// connection, then reconnect to its successor.
			select {
			case <-c.Done():
				return errLost
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if errors.Is(err, protocol.ErrAdmissionConflict) {
			return fail(exitFailed, "input id %s was already used in this session with a different text", s.inputID)
		}
		if errors.Is(err, protocol.ErrCancelled) {
			return fail(exitFailed, "input id %s was cancelled earlier; it never runs (use a new --input-id)", s.inputID)
		}
		if err != nil {
			return s.lostOr(c, err)
		}
		break
	}
	s.admissionID = r.AdmissionID
	s.follow = r.AdmissionID
	s.sessionView = s.withReceipt(r)
	if r.Status == protocol.StatusQueued && r.Reason == protocol.WaitUnknown && !s.warned {
		s.warned = true
		fmt.Fprintf(s.app.stderr, "sessionctl: note: input %s waits behind an admission left unknown by a daemon crash; it runs once an operator resolves that one (sessionctl pending %s)\n", s.inputID, s.sessionID)
	}
	for _, m := range snap.Messages {
		s.sessionView = s.withMessage(m)
	}
	for _, p := range snap.Prompts {
		if p.AdmissionID == s.admissionID {
			s.notePrompt(p)
		}
	}
	if s.finished {
		return nil
	}
	for {
		var n rpc.Notification
		var ok bool
		select {
		case n, ok = <-c.Notifications():
		case <-ctx.Done():
			return ctx.Err()
		}
		if !ok {
			break
		}
		if n.Method != protocol.NotifySessionEvent {
			continue
		}
		var ev protocol.Event
		if json.Unmarshal(n.Params, &ev) != nil || ev.SessionID != s.sessionID {
			continue
		}
		if ev.Seq != nil {
			if *ev.Seq <= s.lastSeq {
				continue
			}
			s.lastSeq = *ev.Seq
		}
		s.apply(ev)
		if s.finished {
			return nil
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errLost
}

func (s *sender) lostOr(c *rpc.Client, err error) error {
	if errors.Is(err, rpc.ErrClosed) || c.Err() != nil {
		return errLost
	}
	return err
}

// apply folds an event into the view (reduce) and notes on stderr each
// prompt its admission opens.
func (s *sender) apply(ev protocol.Event) {
	var changes []change
	s.sessionView, changes = reduce(s.sessionView, ev)
	for _, c := range changes {
		if p, ok := c.(promptOpened); ok && p.Admission == s.admissionID {
			s.notePrompt(p.Prompt)
		}
	}
}

// notePrompt tells, once per prompt, that the turn waits for an answer
// and which command gives it: send itself never answers.
func (s *sender) notePrompt(p protocol.Prompt) {
	if p.PromptID == "" || s.noted[p.PromptID] {
		return
	}
	if s.noted == nil {
		s.noted = map[string]bool{}
	}
	s.noted[p.PromptID] = true
	var how string
	switch p.Kind {
	case protocol.KindApproval:
		ap := approvalOf(p)
		var others []string
		for _, c := range ap.offered() {
			if c != string(protocol.ChoiceOnce) {
				others = append(others, c)
			}
		}
		what := visibleLine(ap.Command)
		if ap.Kind == protocol.ApprovalKindMCP {
			// The call's whole arguments: what is approved is what runs.
			what += " " + oneLine(visibleLine(string(protocol.VisibleJSON(ap.Arguments))))
		}
		how = fmt.Sprintf("the turn waits for approval to run `%s` (%s); %s; prompt %s: answer with `%s` (or %s)",
			what, visibleLine(ap.Reason), ap.remembers(), p.PromptID,
			s.app.cmdline("approve", s.sessionID, p.PromptID, "--choice", "once"), strings.Join(others, ", "))
		if note := ap.unsandboxedNote(); note != "" {
			how = note + "; " + how
			if ap.Justification != "" {
				how += "; justification: " + visibleLine(ap.Justification)
			}
		}
	case protocol.KindClarify:
		c := clarifyOf(p)
		answer, more := "'YOUR ANSWER'", ""
		switch {
		case len(c.Questions) > 1:
			answer, more = "'ANSWER 1' 'ANSWER 2' ...", " (one answer per question, in order)"
		case len(c.Questions) == 1 && len(c.Questions[0].Choices) > 0:
			answer, more = shellQuote(c.Questions[0].Choices[0]), " (choices: "+strings.Join(c.Questions[0].Choices, ", ")+")"
		}
		how = fmt.Sprintf("the turn asks: %s; prompt %s: answer with `%s`%s",
			promptSummary(p), p.PromptID, s.app.cmdline("answer", s.sessionID, p.PromptID, answer), more)
	default:
		how = fmt.Sprintf("the turn waits on prompt %s (%s)", p.PromptID, p.Kind)
	}
	if p.Kind != protocol.KindApproval { // an approval's note is one line already, its command shown exactly
		how = oneLine(how)
	}
	fmt.Fprintf(s.app.stderr, "sessionctl: note: %s\n", how)
}

// reply is the text of the turn's last assistant message with content.
func (s *sender) reply() string {
	ids := make([]int64, 0, len(s.replies))
	for id := range s.replies {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for i := len(ids) - 1; i >= 0; i-- {
		if c := s.replies[ids[i]].Content; strings.TrimSpace(c) != "" {
			return c
		}
	}
	return ""
}

func (s *sender) report() error {
	r := s.receipt
	outcome, errText := string(protocol.StatusUnknown), "" // send's outcome: a terminal outcome, or unknown
	if r.Status == protocol.StatusTerminal {
		outcome = deref(r.Outcome)
		errText = r.Error
		if errText == "" {
			errText = s.turnError
		}
	}
	reply := s.reply()
	if s.app.jsonOut {
		if err := s.app.printJSON(sendResult{SessionID: s.sessionID, InputID: s.inputID, AdmissionID: s.admissionID,
			Outcome: outcome, Error: errText, Reply: reply, Receipt: r}); err != nil {
			return err
		}
	} else if reply != "" {
		fmt.Fprintln(s.app.stdout, strings.TrimRight(reply, "\n"))
	}
	switch outcome {
	case string(protocol.OutcomeCompleted):
		return nil
	case string(protocol.StatusUnknown):
		return fail(exitFailed, "the daemon stopped while admission %s ran; its outcome is unknown and it holds the queue — decide with `%s`", s.admissionID, s.app.cmdline("resolve", s.sessionID, s.admissionID))
	case string(protocol.OutcomeCancelled):
		return fail(exitFailed, "input %s was cancelled before it ran", s.inputID)
	}
	if errText != "" && errText != outcome {
		return fail(exitFailed, "turn %s: %s", outcome, errText)
	}
	return fail(exitFailed, "turn %s", outcome)
}
