package mcp

import "syscall"

// setPdeathsig makes the server receive SIGKILL when the thread that
// forked it ends (see startProcess).
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
