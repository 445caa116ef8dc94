//go:build linux

package sandbox

import "golang.org/x/sys/unix"

// nativeAuditArch is seccomp_data.arch of this build's system calls
// (arm64; its AArch32 compat calls carry AUDIT_ARCH_ARM).
const nativeAuditArch = unix.AUDIT_ARCH_AARCH64

// x32Bit: arm64 has no x32-like ABI sharing its arch value.
const x32Bit = 0
