package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sessiond/sessiond/rpc"
)

// Exit codes, documented in the root command's help.
const (
	exitOK          = 0   // the command did what was asked
	exitFailed      = 1   // a turn did not complete, or the daemon refused the request
	exitUsage       = 2   // bad command line
	exitUnreachable = 3   // no daemon, unreachable daemon, refused token, lost connection
	exitNotFound    = 4   // unknown session, admission or prompt
	exitInterrupted = 130 // sessionctl itself was interrupted (Ctrl-C, SIGTERM)
)

const exitCodesHelp = `Exit codes:
  0    success (for send: the turn completed)
  1    the turn failed, was interrupted or cancelled, or its outcome is unknown
       after a daemon crash; or the daemon refused the request (stale
       generation, not queued, conflicting input id, draining, ...)
  2    usage error (unknown verb, missing argument, bad flag value)
  3    no daemon for this home, daemon unreachable, token refused, or the
       connection was lost and could not be re-established
  4    unknown session, admission or prompt
  130  sessionctl was interrupted (Ctrl-C) before it finished`

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
	var re *rpc.Error
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
		return exitUnreachable, "timed out waiting for the daemon"
	case !started:
		return exitUsage, err.Error() + " (see sessionctl --help)"
	}
	return exitFailed, err.Error()
}

func rpcExitCode(re *rpc.Error) int {
	if re.Reason == rpc.ReasonNotFound {
		return exitNotFound
	}
	if re.Reason == rpc.ReasonInvalidParams {
		return exitUsage
	}
	return exitFailed
}

// oneLine folds a message onto one line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	s = strings.ReplaceAll(s, "\r", "")
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}
