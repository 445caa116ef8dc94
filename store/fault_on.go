//go:build faultinject

package store

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// FaultInjection reports whether this binary was built with -tags
// faultinject (see fault.go).
const FaultInjection = true

// faultEnv is the variable a faultinject build reads at start;
// faultTraceEnv=1 makes it print "sessiond fault: commit N (LABEL)" after
// every commit, so that a test can count the boundaries of a journey and
// name each.
const faultEnv, faultTraceEnv = "SESSIOND_FAULT", "SESSIOND_FAULT_TRACE"

var fault struct {
	trace bool
	mode  string // "before", "after" or "" (no fault asked for)
	at    int64  // N
	mu    sync.Mutex
	count int64 // transactions numbered so far
}

func init() {
	fault.trace = os.Getenv(faultTraceEnv) == "1"
	v := os.Getenv(faultEnv)
	if v == "" {
		return
	}
	kind, num, ok := strings.Cut(v, ":")
	n, err := strconv.ParseInt(num, 10, 64)
	switch {
	case ok && err == nil && n >= 1 && kind == "crash-before-commit":
		fault.mode = "before"
	case ok && err == nil && n >= 1 && kind == "crash-after-commit":
		fault.mode = "after"
	default:
		fmt.Fprintf(os.Stderr, "sessiond fault: %s=%q: want crash-before-commit:N or crash-after-commit:N with N >= 1\n", faultEnv, v)
		os.Exit(2)
	}
	fault.at = n
}

// faultObserve, when set (tests of the tagged build), sees every commit's
// number and label.
var faultObserve func(n int64, label string)

// faultCaller names the function that called InTx (or ExecReserved), the
// label of a transaction that did not set one: "admission.(*Queue).Admit".
func faultCaller() string {
	for skip := 2; skip < 6; skip++ {
		pc, _, _, ok := runtime.Caller(skip)
		if !ok {
			break
		}
		name := runtime.FuncForPC(pc).Name()
		if strings.HasPrefix(name, "github.com/sessiond/sessiond/store.(*DB).") {
			continue // InTx, ExecReserved
		}
		return strings.TrimPrefix(name, "github.com/sessiond/sessiond/")
	}
	return "unlabelled"
}

// faultBefore numbers a transaction whose statements ran, before its
// COMMIT, and crashes there when it is the one asked for.
func faultBefore(label string) int64 {
	fault.mu.Lock()
	fault.count++
	n := fault.count
	fault.mu.Unlock()
	if fault.mode == "before" && n == fault.at {
		faultCrash("before", n, label)
	}
	return n
}

// faultAfter crashes after the COMMIT of transaction n when it is the one
// asked for.
func faultAfter(n int64, label string) {
	if faultObserve != nil {
		faultObserve(n, label)
	}
	if fault.mode == "after" && n == fault.at {
		faultCrash("after", n, label)
	}
	if fault.trace {
		fmt.Fprintf(os.Stderr, "sessiond fault: commit %d (%s)\n", n, label)
	}
}

func faultCrash(when string, n int64, label string) {
	fmt.Fprintf(os.Stderr, "sessiond fault: crash %s commit %d (%s)\n", when, n, label)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL cannot be caught; nothing runs after it
}
