//go:build !linux

package main

import "syscall"

// dieWithCampaign: a parent-death signal is a Linux feature; elsewhere a
// killed campaign leaves its daemons to the operator.
func dieWithCampaign() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
