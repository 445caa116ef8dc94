//go:build !linux

package main

// harden is Linux-only (prctl); elsewhere it does nothing.
func harden() error { return nil }
