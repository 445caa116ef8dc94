//go:build !linux

package mcp

import "syscall"

// setPdeathsig does nothing: a parent-death signal is a Linux feature, so
// elsewhere a server that ignores the end of its input outlives a crashed
// daemon.
func setPdeathsig(*syscall.SysProcAttr) {}
