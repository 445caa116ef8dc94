//go:build linux

package sandbox

import (
	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// nativeAuditArch is seccomp_data.arch of this build's system calls
// (arm64; its AArch32 compat calls carry AUDIT_ARCH_ARM).
const nativeAuditArch = unix.AUDIT_ARCH_AARCH64

// x32Bit: arm64 has no x32-like ABI sharing its arch value.
const x32Bit = 0

// legacyFileCalls: this architecture has only the *at forms.
func legacyFileCalls(func(uint32, uint64) seccomp.ArgumentConditions, func(uint32, uint32) seccomp.ArgumentConditions) []seccomp.NameWithConditions {
	return nil
}
