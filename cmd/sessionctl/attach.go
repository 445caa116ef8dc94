package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/spf13/cobra"

	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
)

const attachLong = `The interactive terminal UI. It prints the transcript, then follows the
session live: the assistant's text as it streams, tool activity (the
command, a live tail of its output, the exit code), queued inputs and inputs
left unknown by a daemon crash. Type a line and press Enter to submit it;
every submit carries a fresh input id, so a retry after a dropped
connection never runs twice.

A line typed while a turn runs is steered into that turn by default: it
reaches the model at the turn's next request, after the tool results
(prompt.submit when_busy steer); Tab switches to queueing it as the next
turn instead, and back. The status line says which.

Keys:
  Enter            submit the line (or answer the open clarify prompt)
  Tab              while a turn runs: steer lines into it (default) or queue them
  o s a d          answer an open approval prompt: once, session, always, deny
  1..9 + Enter     pick a clarify choice; any other text is a free answer
  Ctrl-C           interrupt the running turn; a second Ctrl-C within 2 s,
                   or Ctrl-C while nothing runs, detaches
  Ctrl-D           detach (on an empty line)
  Ctrl-A/E/U/K/W   line editing: start, end, clear, kill to end, delete word

Commands (typed as a line):
  /help            show the keys and commands
  /interrupt       interrupt the running turn
  /detach          detach (also /quit, /exit)
  //text           send "/text" as input

Detaching leaves the session and its turns running in the daemon. When the
connection drops (the daemon restarts, the network hiccups) attach says so,
reconnects by itself (re-reading daemon.json) and resumes after the last
event it saw. It draws inline (no alternate screen), so scrollback keeps the
transcript; it works in plain terminals and under tmux or screen.`

func (a *app) attachCommand() *cobra.Command {
	var history int
	cmd := &cobra.Command{
		Use:   "attach SESSION",
		Short: "Open the interactive terminal UI on a session",
		Long:  attachLong,
		Example: `  sessionctl attach "$S"
  sessionctl attach "$(sessionctl sessions --json | jq -r '.sessions[0].session_id')"
  sessionctl attach "$S" --history 0     # print the whole transcript first`,
		Args: args(1, "SESSION"),
	}
	cmd.Flags().IntVar(&history, "history", 50, "print at most this many transcript messages on attach (0: all)")
	cmd.RunE = a.verb(false, func(ctx context.Context, cmd *cobra.Command, args []string) error {
		if !isTerminal(os.Stdin) || !isTerminal(os.Stdout) {
			return usageError("attach needs a terminal on stdin and stdout; in scripts use `sessionctl send`")
		}
		if history < 0 {
			return usageError("--history must be >= 0")
		}
		return a.attach(ctx, args[0], history)
	})
	return cmd
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (a *app) attach(ctx context.Context, sessionID string, history int) error {
	l := &link{app: a, sessionID: sessionID}
	c, d, err := a.connect(ctx, l.dialOptions())
	if err != nil {
		return err
	}
	// after_seq 0: the retained events come too, for the approval
	// decisions shown in the replayed history.
	zero := int64(0)
	var snap protocol.Snapshot
	if err := a.callOn(ctx, c, protocol.MethodSessionResume, protocol.ResumeParams{SessionID: sessionID, AfterSeq: &zero}, &snap); err != nil {
		c.Close()
		return err
	}
	l.lastSeq = snap.LastSeq

	m := newTUI(l, snap, d.PID, history)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := tea.NewProgram(m, tea.WithContext(runCtx), tea.WithoutSignalHandler())
	l.send = p.Send
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.run(runCtx, c)
	}()
	final, err := p.Run()
	cancel()
	wg.Wait()
	if fm, ok := final.(*tuiModel); ok {
		for _, line := range fm.printQ {
			fmt.Fprintln(a.stdout, line)
		}
		if fm.fatal != nil {
			return fm.fatal
		}
	}
	if err != nil && !errors.Is(err, tea.ErrProgramKilled) && !errors.Is(err, context.Canceled) {
		return fail(exitFailed, "terminal UI: %v", err)
	}
	if ctx.Err() != nil {
		return fail(exitInterrupted, "detached from session %s (signal)", sessionID)
	}
	return nil
}

// link keeps attach connected: it forwards the session's events to the
// UI in order, and when the connection ends it reconnects (re-reading the
// descriptor) and resumes after the last event it forwarded.
type link struct {
	app       *app
	sessionID string
	send      func(tea.Msg)

	mu      sync.Mutex
	cl      *rpc.Client
	lastSeq int64 // only touched by run's goroutine (and before it starts)
}

// Messages from the link to the UI.
type (
	eventMsg struct{ ev protocol.Event }
	lostMsg  struct{ err error }
	retryMsg struct {
		attempt int
		err     error
		wait    time.Duration
	}
	resumedMsg struct {
		snap     protocol.Snapshot
		afterSeq int64
		pid      int
	}
	fatalMsg struct{ err error }
)

func (l *link) dialOptions() rpc.DialOptions {
	return rpc.DialOptions{NotificationQueue: 8192}
}

// client is the live connection, or nil while reconnecting.
func (l *link) client() *rpc.Client {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cl
}

func (l *link) set(c *rpc.Client) {
	l.mu.Lock()
	l.cl = c
	l.mu.Unlock()
}

func (l *link) run(ctx context.Context, c *rpc.Client) {
	for {
		l.set(c)
		l.follow(ctx, c)
		l.set(nil)
		c.Close()
		if ctx.Err() != nil {
			return
		}
		l.send(lostMsg{err: c.Err()})
		c = l.reconnect(ctx)
		if c == nil {
			return
		}
	}
}

// follow forwards c's session events until the connection ends.
func (l *link) follow(ctx context.Context, c *rpc.Client) {
	for {
		select {
		case <-ctx.Done():
			return
		case n, ok := <-c.Notifications():
			if !ok {
				return
			}
			if n.Method != protocol.NotifySessionEvent {
				continue
			}
			var ev protocol.Event
			if json.Unmarshal(n.Params, &ev) != nil || ev.SessionID != l.sessionID {
				continue
			}
			if ev.Seq != nil {
				if *ev.Seq <= l.lastSeq {
					continue
				}
				l.lastSeq = *ev.Seq
			}
			l.send(eventMsg{ev})
		}
	}
}

// reconnect retries with backoff until connected and resumed, the session
// is gone (fatal), or ctx ends.
func (l *link) reconnect(ctx context.Context) *rpc.Client {
	wait := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		c, d, err := l.app.connect(ctx, l.dialOptions())
		if err == nil {
			after := l.lastSeq
			var snap protocol.Snapshot
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err = c.Call(cctx, protocol.MethodSessionResume, protocol.ResumeParams{SessionID: l.sessionID, AfterSeq: &after}, &snap)
			cancel()
			if err == nil {
				l.lastSeq = snap.LastSeq
				l.send(resumedMsg{snap: snap, afterSeq: after, pid: d.PID})
				return c
			}
			c.Close()
			var re *protocol.Error
			if errors.As(err, &re) && re.Reason == protocol.ReasonNotFound {
				l.send(fatalMsg{err: fail(exitNotFound, "session %s no longer exists: %v", l.sessionID, err)})
				return nil
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		l.send(retryMsg{attempt: attempt, err: err, wait: wait})
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, 3*time.Second)
	}
}
