package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
)

// detachWindow is how soon a second Ctrl-C must follow the first one
// (which interrupted the running turn) to detach.
const detachWindow = 2 * time.Second

// callTimeout bounds one request made by the UI.
const callTimeout = 30 * time.Second

// Messages from the UI's own commands.
type (
	submitDoneMsg struct {
		inputID string
		r       protocol.Receipt
		err     error
	}
	respondDoneMsg struct {
		promptID string
		what     string
		r        protocol.RespondResult
		err      error
	}
	interruptDoneMsg struct {
		r   protocol.InterruptResult
		err error
	}
	printedMsg     struct{}
	noticeTimeout  struct{ id int }
	retrySubmitMsg struct{}
)

// toolState says what a tool call in progress is doing: "waiting for
// approval" or "waiting for an answer" while one of its prompts is open
// (the command has not started), otherwise "running".
func (m *tuiModel) toolState(toolCallID string) string {
	for _, p := range m.prompts {
		if id := promptToolCallID(p); id != "" && id == toolCallID {
			if p.Kind == protocol.KindApproval {
				return "waiting for approval"
			}
			return "waiting for an answer"
		}
	}
	return "running"
}

// outItem is a submitted line that has no receipt yet.
type outItem struct {
	inputID, text string
	inflight      bool
	// whenBusy is what the line asks for if a turn runs when it
	// arrives: steer (typed while a turn ran, the default) or queue.
	whenBusy protocol.WhenBusy
}

// clarifyState is the progress of answering a clarify prompt.
type clarifyState struct {
	prompt    protocol.Prompt
	questions []clarifyQuestion
	idx       int
	answers   []any
}

// tuiModel is the attach UI. It is a bubbletea model with a pointer
// receiver: all state lives here and is touched only by Update and View.
type tuiModel struct {
	l       *link
	st      style
	history int

	sessionID string
	pid       int
	width     int // 0 until the first WindowSizeMsg

	connected bool
	connNote  string

	// sessionView is the session as its snapshot and events tell it
	// (reduce.go, shared with send).
	sessionView
	texts       map[string]string // admission id or input id -> text
	toldUnknown map[string]bool   // unknown admissions already reported

	approvals map[string]*approvalRecord // tool_call_id -> its approval, from the replayed events

	clar *clarifyState

	input  []rune
	cursor int
	draft  []rune // the line being typed when a clarify prompt took the input
	outbox []outItem
	// queueWhileBusy: a line typed while a turn runs is queued rather than
	// steered into the turn (Tab toggles).
	queueWhileBusy bool

	lastCtrlC time.Time
	notice    string
	noticeID  int

	printQ   []string
	printing bool

	detached bool
	fatal    error
}

func newTUI(l *link, snap protocol.Snapshot, pid, history int) *tuiModel {
	m := &tuiModel{l: l, st: newStyle(), history: history, sessionID: snap.SessionID, pid: pid,
		texts: map[string]string{}, toldUnknown: map[string]bool{}}
	title := ""
	if snap.Title != "" {
		title = fmt.Sprintf(" %q", snap.Title)
	}
	m.print(m.st.bold(fmt.Sprintf("attached to session %s%s", snap.SessionID, title)) +
		m.st.dim(fmt.Sprintf(" · model %s · cwd %s · sessiond pid %d", snap.Model, snap.Cwd, pid)))
	m.approvals = approvalsFromEvents(snap.Events)
	m.printTranscript(snap.Messages)
	m.adopt(snap)
	m.connected = true
	return m
}

// Init prints nothing yet: the first WindowSizeMsg (which comes at once)
// gives the width to wrap the scrollback to.
func (m *tuiModel) Init() tea.Cmd { return nil }

// print queues lines for the scrollback above the live view.
func (m *tuiModel) print(lines ...string) {
	for _, l := range lines {
		m.printQ = append(m.printQ, strings.Split(l, "\n")...)
	}
}

// flush prints the queued lines, one batch at a time, in order: the next
// batch starts only after printedMsg says the previous one is on screen.
func (m *tuiModel) flush() tea.Cmd {
	if m.printing {
		return nil
	}
	if len(m.printQ) == 0 || m.width == 0 { // no width yet: wait for it
		if m.detached {
			return tea.Quit // attach prints what is left after the UI ends
		}
		return nil
	}
	m.printing = true
	lines := make([]string, 0, len(m.printQ))
	for _, l := range m.printQ {
		// Wrap to the width so that every line takes the rows the
		// renderer expects.
		if ansi.StringWidth(l) > m.width-1 {
			l = ansi.Wrap(l, m.width-1, "")
		}
		lines = append(lines, l)
	}
	batch := strings.Join(lines, "\n")
	m.printQ = nil
	return tea.Sequence(tea.Println(batch), func() tea.Msg { return printedMsg{} })
}

func (m *tuiModel) setNotice(s string) tea.Cmd {
	m.notice = s
	m.noticeID++
	id := m.noticeID
	return tea.Tick(4*time.Second, func(time.Time) tea.Msg { return noticeTimeout{id} })
}

func (m *tuiModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	cmd := m.update(msg)
	return m, tea.Batch(cmd, m.flush())
}

func (m *tuiModel) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width = msg.Width
	case printedMsg:
		m.printing = false
	case noticeTimeout:
		if msg.id == m.noticeID {
			m.notice = ""
		}
	case tea.KeyPressMsg:
		return m.key(msg)
	case tea.PasteMsg:
		if m.activeApproval() == nil {
			m.insert(strings.ReplaceAll(strings.ReplaceAll(msg.Content, "\r\n", "\n"), "\r", "\n"))
		}
	case eventMsg:
		m.apply(msg.ev)
	case resumedMsg:
		return m.resumed(msg)
	case lostMsg:
		m.connected = false
		m.connNote = "reconnecting…"
		m.print(m.st.yellow("! connection lost: " + describeClosed(msg.err) + "; reconnecting…"))
		if m.stream != "" {
			m.print(m.st.green("assistant › ") + m.stream + m.st.dim(" …(stream cut off by the disconnect)"))
			m.stream = ""
		}
	case retryMsg:
		m.connNote = fmt.Sprintf("reconnecting (attempt %d, next in %v): %s", msg.attempt, msg.wait.Round(10*time.Millisecond), oneLine(errString(msg.err)))
	case fatalMsg:
		m.fatal = msg.err
		m.detached = true
	case submitDoneMsg:
		return m.submitDone(msg)
	case retrySubmitMsg:
		return m.sendOutbox()
	case respondDoneMsg:
		switch {
		case msg.err == nil && msg.r.Status == protocol.AlreadyResolved:
			return m.setNotice("that prompt was already answered; the first answer stands")
		case msg.err == nil:
			return m.setNotice(msg.what + " sent")
		case errors.Is(msg.err, protocol.ErrStaleGeneration):
			return m.setNotice("that prompt is no longer answerable (its turn ended)")
		default:
			m.print(m.st.red("✗ could not answer the prompt: " + oneLine(errString(msg.err))))
		}
	case interruptDoneMsg:
		switch {
		case msg.err == nil && msg.r.Interrupted == nil:
			return m.setNotice("nothing was running")
		case errors.Is(msg.err, protocol.ErrStaleGeneration):
			return m.setNotice("that turn had already ended")
		case msg.err != nil:
			m.print(m.st.red("✗ interrupt failed: " + oneLine(errString(msg.err))))
		}
	}
	return nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// --- keys -----------------------------------------------------------------

func (m *tuiModel) key(k tea.KeyPressMsg) tea.Cmd {
	switch k.String() {
	case "ctrl+c":
		return m.ctrlC()
	case "ctrl+d":
		if len(m.input) == 0 {
			return m.detach()
		}
		m.deleteAt()
		return nil
	}
	if p := m.activeApproval(); p != nil {
		a := approvalOf(*p)
		var keys []string
		for _, c := range a.offered() { // only the choices this prompt offers
			if strings.ToLower(k.Text) == c[:1] {
				return m.approve(*p, c)
			}
			keys = append(keys, c[:1]+" ("+c+")")
		}
		if k.Text != "" || k.String() == "enter" {
			return m.setNotice("an approval is waiting: press " + strings.Join(keys, ", "))
		}
		return nil
	}
	switch k.String() {
	case "enter":
		return m.enter()
	case "backspace", "ctrl+h":
		if m.cursor > 0 {
			m.input = append(m.input[:m.cursor-1], m.input[m.cursor:]...)
			m.cursor--
		}
	case "delete":
		m.deleteAt()
	case "left", "ctrl+b":
		m.cursor = max(0, m.cursor-1)
	case "right", "ctrl+f":
		m.cursor = min(len(m.input), m.cursor+1)
	case "home", "ctrl+a":
		m.cursor = 0
	case "end", "ctrl+e":
		m.cursor = len(m.input)
	case "ctrl+u":
		m.input = append([]rune{}, m.input[m.cursor:]...)
		m.cursor = 0
	case "ctrl+k":
		m.input = m.input[:m.cursor]
	case "ctrl+w":
		i := m.cursor
		for i > 0 && unicode.IsSpace(m.input[i-1]) {
			i--
		}
		for i > 0 && !unicode.IsSpace(m.input[i-1]) {
			i--
		}
		m.input = append(m.input[:i], m.input[m.cursor:]...)
		m.cursor = i
	case "tab":
		// While a turn runs, Enter steers the line into it or queues it.
		m.queueWhileBusy = !m.queueWhileBusy
		if m.queueWhileBusy {
			return m.setNotice("while a turn runs, Enter queues the line (Tab: steer it into the turn)")
		}
		return m.setNotice("while a turn runs, Enter steers the line into the turn (Tab: queue it)")
	case "esc":
		m.notice = ""
	default:
		if k.Text != "" {
			m.insert(k.Text)
		}
	}
	return nil
}

func (m *tuiModel) insert(s string) {
	r := []rune(s)
	in := make([]rune, 0, len(m.input)+len(r))
	in = append(in, m.input[:m.cursor]...)
	in = append(in, r...)
	in = append(in, m.input[m.cursor:]...)
	m.input = in
	m.cursor += len(r)
}

func (m *tuiModel) deleteAt() {
	if m.cursor < len(m.input) {
		m.input = append(m.input[:m.cursor], m.input[m.cursor+1:]...)
	}
}

func (m *tuiModel) ctrlC() tea.Cmd {
	now := time.Now()
	if m.running == "" || (!m.lastCtrlC.IsZero() && now.Sub(m.lastCtrlC) < detachWindow) {
		return m.detach()
	}
	m.lastCtrlC = now
	return tea.Batch(m.interrupt(), m.setNotice("interrupting the turn… (Ctrl-C again within 2 s detaches)"))
}

func (m *tuiModel) detach() tea.Cmd {
	m.detached = true
	return nil // flush quits once the scrollback is printed
}

func (m *tuiModel) interrupt() tea.Cmd {
	c := m.l.client()
	if c == nil {
		m.print(m.st.red("✗ not connected: cannot interrupt now"))
		return nil
	}
	p := protocol.InterruptParams{SessionID: m.sessionID}
	if m.runningGen > 0 {
		gen := m.runningGen
		p.ExecutionGeneration = &gen
	}
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		var r protocol.InterruptResult
		err := c.Call(ctx, protocol.MethodInterrupt, p, &r)
		return interruptDoneMsg{r: r, err: err}
	}
}

func (m *tuiModel) enter() tea.Cmd {
	text := string(m.input)
	if m.clar != nil {
		return m.answerClarify(strings.TrimSpace(text))
	}
	if strings.TrimSpace(text) == "" {
		return nil
	}
	switch strings.TrimSpace(text) {
	case "/detach", "/quit", "/exit":
		m.input, m.cursor = nil, 0
		return m.detach()
	case "/interrupt":
		m.input, m.cursor = nil, 0
		if m.running == "" {
			return m.setNotice("nothing is running")
		}
		return m.interrupt()
	case "/help":
		m.input, m.cursor = nil, 0
		m.print(m.st.dim("Enter submits · o/s/a/d answer an approval · a number or text answers a clarify prompt · " +
			"Ctrl-C interrupts, twice detaches · /detach · /interrupt · start a line with // to send a literal /"))
		return nil
	}
	if strings.HasPrefix(text, "//") {
		text = text[1:]
	}
	m.input, m.cursor = nil, 0
	id := newInputID("tui")
	m.texts[id] = text
	it := outItem{inputID: id, text: text}
	if m.running != "" {
		// Typed while a turn runs: join it (the default) or wait.
		it.whenBusy = protocol.WhenBusySteer
		if m.queueWhileBusy {
			it.whenBusy = protocol.WhenBusyQueue
		}
	}
	m.outbox = append(m.outbox, it)
	return m.sendOutbox()
}

// sendOutbox (re)submits every line without a receipt, with its original
// input id: a line that did reach the daemon comes back as a duplicate.
func (m *tuiModel) sendOutbox() tea.Cmd {
	c := m.l.client()
	if c == nil {
		if len(m.outbox) > 0 {
			return m.setNotice("not connected: will submit when reconnected")
		}
		return nil
	}
	var cmds []tea.Cmd
	for i := range m.outbox {
		if m.outbox[i].inflight {
			continue
		}
		m.outbox[i].inflight = true
		it := m.outbox[i]
		cmds = append(cmds, func() tea.Msg {
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			var r protocol.Receipt
			err := c.Call(ctx, protocol.MethodPromptSubmit, protocol.SubmitParams{SessionID: m.sessionID, InputID: it.inputID, Text: it.text, WhenBusy: it.whenBusy}, &r)
			return submitDoneMsg{inputID: it.inputID, r: r, err: err}
		})
	}
	return tea.Batch(cmds...)
}

func (m *tuiModel) submitDone(msg submitDoneMsg) tea.Cmd {
	idx := -1
	for i, it := range m.outbox {
		if it.inputID == msg.inputID {
			idx = i
		}
	}
	if idx < 0 {
		return nil // acknowledged by an event already
	}
	if msg.err == nil {
		text := m.outbox[idx].text
		m.outbox = append(m.outbox[:idx], m.outbox[idx+1:]...)
		m.texts[msg.r.AdmissionID] = text
		m.sessionView = m.sessionView.admitted(msg.r)
		return nil
	}
	m.outbox[idx].inflight = false
	var re *protocol.Error
	switch {
	case errors.Is(msg.err, protocol.ErrOverloaded):
		return tea.Tick(time.Second, func(time.Time) tea.Msg { return retrySubmitMsg{} })
	case errors.Is(msg.err, protocol.ErrDraining), errors.Is(msg.err, rpc.ErrClosed), errors.Is(msg.err, context.DeadlineExceeded):
		return m.setNotice("not connected: will submit when reconnected")
	case errors.As(msg.err, &re):
		text := m.outbox[idx].text
		m.outbox = append(m.outbox[:idx], m.outbox[idx+1:]...)
		m.print(m.st.red(fmt.Sprintf("✗ not submitted (%s): %s", oneLine(re.Error()), clip(oneLine(text), 60))))
	default:
		return m.setNotice("submit failed (" + oneLine(msg.err.Error()) + "); will retry when reconnected")
	}
	return nil
}

// --- prompts ----------------------------------------------------------------

func (m *tuiModel) activeApproval() *protocol.Prompt {
	if len(m.prompts) > 0 && m.prompts[0].Kind == protocol.KindApproval {
		return &m.prompts[0]
	}
	return nil
}

func (m *tuiModel) approve(p protocol.Prompt, choice string) tea.Cmd {
	c := m.l.client()
	if c == nil {
		return m.setNotice("not connected: cannot answer now")
	}
	gen := p.ExecutionGeneration
	params := protocol.RespondParams{SessionID: m.sessionID, PromptID: p.PromptID, ExecutionGeneration: &gen, Choice: protocol.Choice(choice)}
	return tea.Batch(m.setNotice("sending "+choice+"…"), func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		var r protocol.RespondResult
		err := c.Call(ctx, protocol.MethodApprovalRespond, params, &r)
		return respondDoneMsg{promptID: p.PromptID, what: "approval " + choice, r: r, err: err}
	})
}

// syncClarify points the clarify state at the first open prompt when it is
// a clarify prompt.
// A line being typed is put aside while the prompt takes the input, and
// comes back afterwards.
func (m *tuiModel) syncClarify() {
	if len(m.prompts) == 0 || m.prompts[0].Kind != protocol.KindClarify {
		if m.clar != nil {
			m.input, m.draft = m.draft, nil
			m.cursor = len(m.input)
		}
		m.clar = nil
		return
	}
	p := m.prompts[0]
	if m.clar != nil && m.clar.prompt.PromptID == p.PromptID {
		return
	}
	if m.clar == nil {
		m.draft, m.input, m.cursor = m.input, nil, 0
	}
	pl := clarifyOf(p)
	if len(pl.Questions) == 0 {
		pl.Questions = []clarifyQuestion{{Question: "(no question given)"}}
	}
	m.clar = &clarifyState{prompt: p, questions: pl.Questions}
}

func (m *tuiModel) answerClarify(text string) tea.Cmd {
	if text == "" {
		return m.setNotice("type an answer (a number picks a choice), then Enter")
	}
	cs := m.clar
	cs.answers = append(cs.answers, clarifyAnswer(cs.questions[cs.idx], text))
	cs.idx++
	m.input, m.cursor = nil, 0
	if cs.idx < len(cs.questions) {
		return nil
	}
	var answer any
	if len(cs.answers) == 1 {
		answer = cs.answers[0]
	} else {
		list := make([]string, len(cs.answers))
		for i, a := range cs.answers {
			list[i] = answerText(a)
		}
		answer = list
	}
	raw, _ := json.Marshal(answer)
	c := m.l.client()
	if c == nil {
		cs.idx, cs.answers = 0, nil
		return m.setNotice("not connected: answer again once reconnected")
	}
	gen := cs.prompt.ExecutionGeneration
	params := protocol.RespondParams{SessionID: m.sessionID, PromptID: cs.prompt.PromptID, ExecutionGeneration: &gen, Answer: raw}
	pid := cs.prompt.PromptID
	return tea.Batch(m.setNotice("sending the answer…"), func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		var r protocol.RespondResult
		err := c.Call(ctx, protocol.MethodClarifyRespond, params, &r)
		return respondDoneMsg{promptID: pid, what: "answer", r: r, err: err}
	})
}

// clarifyAnswer reads a typed answer: choice numbers ("2", or "1,3" for a
// multi-select question) pick those choices; anything else is a free
// answer.
func clarifyAnswer(q clarifyQuestion, text string) any {
	if len(q.Choices) == 0 {
		return text
	}
	fields := strings.FieldsFunc(text, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	var picked []string
	for _, f := range fields {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > len(q.Choices) {
			return text
		}
		picked = append(picked, q.Choices[n-1])
	}
	switch {
	case q.MultiSelect && len(picked) > 0:
		return picked
	case len(picked) == 1:
		return picked[0]
	}
	return text
}

// --- state from the daemon -------------------------------------------------

// adopt takes the authoritative state of a snapshot.
func (m *tuiModel) adopt(snap protocol.Snapshot) {
	for _, r := range snap.Pending {
		if r.Text != "" {
			m.texts[r.AdmissionID] = r.Text
		}
	}
	m.sessionView = m.sessionView.adopt(snap)
	m.syncClarify()
	for _, r := range m.pending {
		if r.Status == protocol.StatusUnknown {
			m.tellUnknown(r)
		}
	}
}

func (m *tuiModel) resumed(msg resumedMsg) tea.Cmd {
	m.connected, m.connNote = true, ""
	if msg.snap.SnapshotRequired {
		m.print(m.st.yellow("! events were pruned while disconnected; here is the transcript again"))
		m.approvals = approvalsFromEvents(msg.snap.Events)
		m.printTranscript(msg.snap.Messages)
	} else {
		for _, ev := range msg.snap.Events {
			m.apply(ev)
		}
	}
	m.print(m.st.green(fmt.Sprintf("✓ reconnected to sessiond pid %d; resumed after seq %d (%d missed event(s) replayed)", msg.pid, msg.afterSeq, len(msg.snap.Events))))
	m.adopt(msg.snap)
	for i := range m.outbox {
		m.outbox[i].inflight = false
	}
	return m.sendOutbox()
}

func (m *tuiModel) tellUnknown(r protocol.Receipt) {
	if m.toldUnknown[r.AdmissionID] {
		return
	}
	m.toldUnknown[r.AdmissionID] = true
	m.print(m.st.red(fmt.Sprintf("! input #%d is unknown: the daemon stopped while it ran; it holds the queue until an operator runs: %s", r.Seq, m.l.app.cmdline("resolve", m.sessionID, r.AdmissionID))))
}

func (m *tuiModel) textOf(r protocol.Receipt) string {
	if t := m.texts[r.AdmissionID]; t != "" {
		return t
	}
	if t := m.texts[r.InputID]; t != "" {
		return t
	}
	if r.Text != "" {
		return r.Text
	}
	return "(input " + r.InputID + ")"
}

// apply folds an event into the view (reduce) and prints what changed.
func (m *tuiModel) apply(ev protocol.Event) {
	var changes []change
	m.sessionView, changes = reduce(m.sessionView, ev)
	for _, c := range changes {
		m.show(c)
	}
	m.syncClarify()
}

// show prints one change to the scrollback.
func (m *tuiModel) show(c change) {
	switch c := c.(type) {
	case admissionChanged:
		for i, it := range m.outbox {
			if it.inputID == c.Receipt.InputID {
				m.texts[c.Receipt.AdmissionID] = it.text
				m.outbox = append(m.outbox[:i], m.outbox[i+1:]...)
				break
			}
		}
	case inputCancelled:
		m.print(m.st.dim(fmt.Sprintf("· input #%d cancelled: %s", c.Receipt.Seq, clip(oneLine(m.textOf(c.Receipt)), 60))))
	case inputUnknown:
		m.tellUnknown(c.Receipt)
	case turnStarted:
		m.lastCtrlC, m.notice = time.Time{}, ""
		m.print(m.st.cyan(userPrefix(c.Sender)) + c.Text)
	case inputSteered:
		m.print(m.st.cyan(userPrefix(c.Sender)) + c.Text + m.st.dim(" (steered into the running turn)"))
	case assistantSaid:
		m.print(m.st.green("assistant › ") + strings.TrimRight(c.Content, "\n"))
	case toolStarted:
		m.print(m.st.yellow("⚙ "+c.Name+" ") + c.Summary)
	case toolEnded:
		for _, l := range tailLines(c.Output, 5) {
			m.print(m.st.dim("  │ ") + l)
		}
		if c.OK {
			m.print(m.st.green("  ↳ ") + c.Line)
		} else {
			m.print(m.st.red("  ↳ " + c.Line))
		}
	case promptClosed:
		p := c.Closed
		by := ""
		if p.AnsweredBy != nil && p.AnsweredBy.Client != "" {
			by = " (by " + p.AnsweredBy.Client + ", connection " + p.AnsweredBy.Conn + ")"
		}
		switch p.Resolution {
		case protocol.ResolutionAnswered:
			if ch := p.Choice(); ch != "" {
				m.print(m.st.dim("  · " + c.Kind + ": " + string(ch) + by))
			} else if a := p.Answer(); a != nil {
				m.print(m.st.dim("  · " + c.Kind + " answered: " + answerText(a) + by))
			}
		case protocol.ResolutionTimedOut:
			m.print(m.st.yellow("  · " + c.Kind + " timed out (no answer counts as deny)"))
		default:
			m.print(m.st.dim("  · " + c.Kind + " closed: " + string(p.Resolution)))
		}
	case mcpChanged:
		m.print(mcpLine(m.st, c.Status))
	case turnEnded:
		if c.CutStream != "" {
			m.print(m.st.green("assistant › ") + c.CutStream + m.st.dim(" …(cut off)"))
		}
		m.lastCtrlC, m.notice = time.Time{}, ""
		switch c.Outcome {
		case protocol.OutcomeCompleted:
			m.print(m.st.dim("── turn completed ──"))
		case protocol.OutcomeInterrupted:
			m.print(m.st.yellow("── turn interrupted" + suffix(c.Error) + " ──"))
		default:
			m.print(m.st.red("── turn " + string(c.Outcome) + suffix(c.Error) + " ──"))
		}
	}
}

func suffix(e string) string {
	if e == "" || e == string(protocol.OutcomeInterrupted) {
		return ""
	}
	return ": " + oneLine(e)
}

func (m *tuiModel) rememberCalls(raw json.RawMessage) []toolCall {
	m.callNames = withCalls(m.callNames, raw)
	return parseCalls(raw)
}

func (m *tuiModel) printTranscript(msgs []protocol.Message) {
	start := 0
	if m.history > 0 && len(msgs) > m.history {
		start = len(msgs) - m.history
		m.print(m.st.dim(fmt.Sprintf("… %d earlier messages not shown (--history 0 shows all)", start)))
	}
	for _, msg := range msgs[:start] {
		m.callNames = withCalls(m.callNames, msg.ToolCalls)
	}
	for _, msg := range msgs[start:] {
		switch msg.Role {
		case protocol.RoleUser:
			m.print(m.st.cyan(userPrefix(msg.Sender)) + msg.Content)
		case protocol.RoleAssistant:
			calls := m.rememberCalls(msg.ToolCalls)
			if strings.TrimSpace(msg.Content) != "" {
				m.print(m.st.green("assistant › ") + strings.TrimRight(msg.Content, "\n"))
			}
			for _, c := range calls {
				m.print(m.st.yellow("⚙ "+c.Name+" ") + toolSummary(c.Name, json.RawMessage(c.Arguments)))
				if ap := m.approvals[c.ID]; ap != nil {
					m.print(m.st.dim("  · " + approvalLine(*ap)))
				}
			}
		case protocol.RoleTool:
			if !json.Valid([]byte(msg.Content)) {
				m.print(m.st.dim("  ↳ " + oneLine(msg.Content)))
				continue
			}
			line, out := resultSummary(m.callNames[msg.ToolCallID], true, nil, json.RawMessage(msg.Content))
			if strings.HasPrefix(line, "✗ interrupted while running") {
				for _, l := range tailLines(out, 5) {
					m.print(m.st.dim("  │ " + l))
				}
			}
			m.print(m.st.dim("  ↳ " + line))
		case protocol.RoleBoundary:
			m.print(m.st.yellow("── " + oneLine(msg.Content) + " ──"))
		}
	}
	if len(msgs) > 0 {
		m.print(m.st.dim("── live ──"))
	}
}

// --- view -------------------------------------------------------------------

func (m *tuiModel) View() tea.View {
	w := max(m.width, 20)
	if m.width == 0 {
		w = 80
	}
	fit := func(s string) string { return ansi.Truncate(s, w-1, "…") }
	var lines []string
	if m.detached {
		msg := fmt.Sprintf("detached from session %s; it stays in the daemon (sessionctl attach %s)", m.sessionID, m.sessionID)
		if m.fatal != nil {
			msg = "detached: " + m.fatal.Error()
		}
		return tea.NewView(ansi.Wrap(m.st.dim(msg), w-1, "") + "\n")
	}
	if m.stream != "" {
		wrapped := strings.Split(ansi.Wrap(m.st.green("assistant › ")+m.stream, w-1, ""), "\n")
		if len(wrapped) > 12 {
			wrapped = append([]string{m.st.dim("…")}, wrapped[len(wrapped)-11:]...)
		}
		lines = append(lines, wrapped...)
	}
	for _, tv := range m.tools {
		// The command itself is the last scrollback line (tool.started).
		lines = append(lines, fit(m.st.yellow("  ⋯ ")+m.st.dim(tv.name+" "+m.toolState(tv.id)+": ")+tv.summary))
		for _, l := range tailLines(tv.out, 6) {
			lines = append(lines, fit(m.st.dim("  │ ")+l))
		}
	}
	for _, r := range m.pending {
		switch r.Status {
		case protocol.StatusQueued:
			why := ""
			if r.Reason != "" {
				why = " (waits: " + string(r.Reason) + ")"
			}
			lines = append(lines, fit(m.st.dim(fmt.Sprintf("queued #%d%s: ", r.Seq, why))+oneLine(m.textOf(r))))
		case protocol.StatusUnknown:
			lines = append(lines, fit(m.st.red(fmt.Sprintf("unknown #%d: ", r.Seq))+oneLine(m.textOf(r))+
				m.st.dim(" — resolve: "+m.l.app.cmdline("resolve", m.sessionID, r.AdmissionID))))
		}
	}
	for _, it := range m.outbox {
		state := "sending"
		if !m.connected {
			state = "will send when reconnected"
		}
		lines = append(lines, fit(m.st.dim(state+": ")+oneLine(it.text)))
	}
	lines = append(lines, m.promptBox(w)...)
	if m.notice != "" {
		lines = append(lines, fit(m.st.yellow(m.notice)))
	}
	lines = append(lines, fit(m.statusLine()))
	prefix, inputLine, cx := m.inputLine(w)
	lines = append(lines, prefix+inputLine)
	v := tea.NewView(strings.Join(lines, "\n"))
	v.Cursor = tea.NewCursor(cx, len(lines)-1)
	return v
}

func (m *tuiModel) promptBox(w int) []string {
	if len(m.prompts) == 0 {
		return nil
	}
	fit := func(s string) string { return ansi.Truncate(s, w-1, "…") }
	bar := m.st.yellow("│ ")
	p := m.prompts[0]
	var out []string
	switch p.Kind {
	case protocol.KindApproval:
		a := approvalOf(p)
		out = append(out, fit(m.st.yellow("┌ approval needed")+m.st.dim(" ("+string(a.Risk)+")")))
		// Whole fields, wrapped, never cut, control characters and escape
		// sequences made visible: what is approved is what runs.
		field := func(name, value string, style func(string) string) {
			for i, l := range strings.Split(ansi.Hardwrap(visible(value, true), max(w-12, 20), true), "\n") {
				if i > 0 {
					name = strings.Repeat(" ", len(name))
				}
				out = append(out, bar+m.st.bold(name)+style(l))
			}
		}
		plain := func(s string) string { return s }
		if note := a.unsandboxedNote(); note != "" {
			field("", note, m.st.red)
		}
		if a.Kind == protocol.ApprovalKindMCP {
			field("server  ", a.Server, plain)
			field("tool    ", a.Tool, plain)
			field("args    ", prettyArgs(a.Arguments), plain)
		} else {
			field("command ", a.Command, plain)
		}
		field("cwd     ", a.Cwd, plain)
		field("reason  ", a.Reason, plain)
		if a.Justification != "" {
			field("why     ", a.Justification, plain)
		}
		field("remember", " "+a.remembers(), plain)
		var keys []string
		for _, c := range a.offered() {
			keys = append(keys, m.st.bold("["+c[:1]+"]")+" "+c)
		}
		out = append(out, fit(m.st.yellow("└ ")+strings.Join(keys, "  ")))
	case protocol.KindClarify:
		cs := m.clar
		if cs == nil {
			return nil
		}
		q := cs.questions[min(cs.idx, len(cs.questions)-1)]
		head := "┌ question"
		if len(cs.questions) > 1 {
			head += fmt.Sprintf(" %d of %d", cs.idx+1, len(cs.questions))
		}
		out = append(out, fit(m.st.yellow(head)))
		for _, l := range strings.Split(ansi.Wrap(q.Question, w-3, ""), "\n") {
			out = append(out, bar+l)
		}
		for i, c := range q.Choices {
			out = append(out, fit(bar+m.st.bold(fmt.Sprintf("%d)", i+1))+" "+c))
		}
		hint := "type your answer, Enter sends"
		if len(q.Choices) > 0 {
			hint = "type a number or your own answer, Enter sends"
			if q.MultiSelect {
				hint = "type numbers (e.g. 1,3) or your own answer, Enter sends"
			}
		}
		out = append(out, fit(m.st.yellow("└ ")+m.st.dim(hint)))
	}
	if len(m.prompts) > 1 {
		out = append(out, fit(m.st.dim(fmt.Sprintf("(%d more prompts waiting)", len(m.prompts)-1))))
	}
	return out
}

func (m *tuiModel) statusLine() string {
	var parts []string
	if m.connected {
		parts = append(parts, m.st.green("● connected"))
	} else {
		parts = append(parts, m.st.red("○ "+m.connNote))
	}
	held := false
	for _, r := range m.pending {
		held = held || r.Status == protocol.StatusUnknown
	}
	switch {
	case !m.connected:
		parts = append(parts, m.st.dim("Ctrl-C detaches · /help"))
	case m.running != "" && m.queueWhileBusy:
		parts = append(parts, m.st.bold("turn running")+m.st.dim(" · Enter queues (Tab: steer) · Ctrl-C interrupts, twice detaches"))
	case m.running != "":
		parts = append(parts, m.st.bold("turn running")+m.st.dim(" · Enter steers into it (Tab: queue) · Ctrl-C interrupts, twice detaches"))
	case held:
		// Inputs sent now queue behind the unknown one until it is resolved.
		parts = append(parts, m.st.red("held (unknown input: resolve it from a shell)")+m.st.dim(" · Enter queues · Ctrl-C detaches"))
	default:
		parts = append(parts, "idle"+m.st.dim(" · Enter sends · Ctrl-C detaches · /help"))
	}
	if s := mcpSummary(m.st, m.mcp); s != "" {
		parts = append(parts, s)
	}
	return strings.Join(parts, m.st.dim(" · "))
}

// inputLine renders the editable line, scrolled so the cursor is
// visible, and returns the cursor column.
func (m *tuiModel) inputLine(w int) (prefix, text string, cursorX int) {
	prefix = m.st.bold("> ")
	plain := 2
	if m.clar != nil {
		prefix, plain = m.st.yellow("answer> "), 8
	} else if p := m.activeApproval(); p != nil {
		a := approvalOf(*p)
		var keys []string
		for _, c := range a.offered() {
			keys = append(keys, c[:1])
		}
		return m.st.yellow("approval> "), m.st.dim("press " + strings.Join(keys, ", ")), 10
	}
	shown := strings.ReplaceAll(string(m.input), "\n", "↵")
	runes := []rune(shown)
	room := w - plain - 2
	start := 0
	for ansi.StringWidth(string(runes[start:m.cursor])) > room {
		start++
	}
	vis := string(runes[start:])
	if start > 0 {
		vis = "…" + string(runes[start+1:])
	}
	vis = ansi.Truncate(vis, room+1, "")
	cursorX = plain + ansi.StringWidth(string(runes[start:m.cursor]))
	return prefix, vis, cursorX
}
