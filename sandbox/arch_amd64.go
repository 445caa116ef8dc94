//go:build linux

package sandbox

import (
	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// nativeAuditArch is seccomp_data.arch of this build's system calls.
const nativeAuditArch = unix.AUDIT_ARCH_X86_64

// x32Bit marks an x32 system call number (same arch as x86_64, nr with
// __X32_SYSCALL_BIT set); 0 where there is no such ABI.
const x32Bit = 0x40000000

// legacyFileCalls are the file-metadata filter's rules for the system
// calls x86_64 has besides the *at forms: chmod(path, mode),
// mknod(path, mode, dev), open(path, flags, mode), creat(path, mode).
func legacyFileCalls(bits func(uint32, uint64) seccomp.ArgumentConditions, created func(uint32, uint32) seccomp.ArgumentConditions) []seccomp.NameWithConditions {
	return []seccomp.NameWithConditions{
		{Name: "chmod", Conditions: bits(1, modeSetID)},
		{Name: "mknod", Conditions: bits(1, modeDevice|modeSetID)},
		{Name: "open", Conditions: created(1, 2)},
		{Name: "creat", Conditions: bits(1, modeSetID)},
	}
}
