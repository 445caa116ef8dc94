package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
)

// Exit codes, documented once, in the root command's help (exitCodesHelp).
const (
	exitOK          = 0   // the command did what was asked
	exitFailed      = 1   // a turn did not complete, or the daemon refused the request
	exitUsage       = 2   // bad command line, found before anything changed in the daemon
	exitUnreachable = 3   // no daemon, unreachable daemon, refused token, lost connection
	exitNotFound    = 4   // unknown session, admission or prompt
	exitTimeout     = 5   // --timeout passed before the answer (send: before the turn settled)
	exitInterrupted = 130 // sessionctl itself was interrupted (Ctrl-C, SIGTERM)
)

const exitCodesHelp = `Exit codes (the same for every verb):
  0    success (for send: the turn completed)
  1    the turn failed, was interrupted or cancelled, or its outcome is unknown
       after a daemon crash; or the daemon refused the request (invalid
       params such as a --cwd that does not exist, stale generation, not
       queued, conflicting input id, draining, ...); or an answer came after
       the prompt was answered (the first answer stands); or you declined a
       confirmation (resolve)
  2    usage error, found before anything changed in the daemon (unknown
       verb, missing argument, bad flag value such as a malformed --input-id,
       approve on a clarify prompt or answer on an approval)
  3    no daemon for this home, daemon unreachable, token refused, or the
       connection was lost and could not be re-established
  4    unknown session, admission or prompt
  5    --timeout passed before the answer came; the request may still take
       effect (send: the turn goes on in the daemon)
  130  sessionctl was interrupted (Ctrl-C) before it finished`

// exitCodesPointer ends every verb's help instead of the whole table.
const exitCodesPointer = "Exit codes: 0 on success; the others are listed once in `sessionctl --help`."

// exitError carries an exit code and one human-readable line.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func fail(code int, format string, args ...any) error {
	return &exitError{code: code, msg: fmt.Sprintf(format, args...)}
}

// usageError is a command-line mistake (exit 2).
func usageError(format string, args ...any) error { return fail(exitUsage, format, args...) }

// exitCode prints err as one line on stderr and maps it to an exit code.
func (a *app) exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	code, msg := classify(err, a.started)
	if msg != "" {
		fmt.Fprintf(a.stderr, "sessionctl: %s\n", oneLine(msg))
	}
	return code
}

// classify maps an error to its exit code and message. Errors before a verb
// started running are command-line errors from cobra (exit 2).
func classify(err error, started bool) (int, string) {
	var ee *exitError
	var re *protocol.Error
	switch {
	case errors.As(err, &ee):
		return ee.code, ee.msg
	case errors.As(err, &re):
		return rpcExitCode(re), re.Error()
	case errors.Is(err, rpc.ErrClosed):
		return exitUnreachable, err.Error()
	case errors.Is(err, context.Canceled):
		return exitInterrupted, "interrupted"
	case errors.Is(err, context.DeadlineExceeded):
		return exitTimeout, "gave up waiting for the daemon's answer (--timeout); the request may still take effect"
	case !started:
		return exitUsage, err.Error() + " (see sessionctl --help)"
	}
	return exitFailed, err.Error()
}

// rpcExitCode maps a refusal by the daemon: not_found is 4, every other
// refusal (invalid_params included: the daemon, not the command line,
// judged it) is 1.
func rpcExitCode(re *protocol.Error) int {
	if re.Reason == protocol.ReasonNotFound {
		return exitNotFound
	}
	return exitFailed
}

// oneLine folds a message onto one line (carriage returns dropped, runs
// of white space one space) with its other control characters and escape
// sequences made visible (protocol.Visible): error lines and one-line
// summaries may quote what a model or another client wrote.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	s = protocol.Visible(strings.ReplaceAll(s, "\r", ""))
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}
