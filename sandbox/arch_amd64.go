//go:build linux

package sandbox

import "golang.org/x/sys/unix"

// nativeAuditArch is seccomp_data.arch of this build's system calls.
const nativeAuditArch = unix.AUDIT_ARCH_X86_64

// x32Bit marks an x32 system call number (same arch as x86_64, nr with
// __X32_SYSCALL_BIT set); 0 where there is no such ABI.
const x32Bit = 0x40000000
