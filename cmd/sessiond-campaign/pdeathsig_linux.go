package main

import "syscall"

// dieWithCampaign: each daemon gets SIGKILL when the campaign ends.
func dieWithCampaign() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
