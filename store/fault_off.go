//go:build !faultinject

package store

// Release build: no fault injection (see fault.go). These are empty and
// inlined away; SESSIOND_FAULT is never read.

func faultCaller() string                { return "" }
func faultBefore(label string) (n int64) { return 0 }
func faultAfter(n int64, label string)   {}

// FaultInjection reports whether this binary was built with -tags
// faultinject (see fault.go).
const FaultInjection = false
