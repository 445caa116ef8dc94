package sandbox

import (
	"fmt"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// archFilter is the first seccomp filter the helper loads: it kills the
// process (SECCOMP_RET_KILL_PROCESS) on any system call whose
// seccomp_data.arch is not this build's (an i386 call through int 0x80 on
// x86_64, an AArch32 one on arm64) and, on x86_64, on any x32 call (nr
// with bit 30 set). go-seccomp-bpf's filter, loaded after it, returns its
// default action (allow) for a foreign architecture: without this one a
// command could reach socket(2) of another ABI past it.
func archFilter() ([]bpf.Instruction, error) {
	if nativeAuditArch == 0 {
		return nil, fmt.Errorf("seccomp: no architecture filter for this architecture")
	}
	const kill = unix.SECCOMP_RET_KILL_PROCESS
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: nativeAuditArch, SkipTrue: 1},
		bpf.RetConstant{Val: kill},
	}
	if x32Bit != 0 {
		prog = append(prog,
			bpf.LoadAbsolute{Off: 0, Size: 4}, // seccomp_data.nr
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: x32Bit, SkipTrue: 0, SkipFalse: 1},
			bpf.RetConstant{Val: kill},
		)
	}
	return append(prog, bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW}), nil
}

// loadRawFilter installs prog with seccomp(SECCOMP_SET_MODE_FILTER); the
// caller has set no_new_privs.
func loadRawFilter(prog []bpf.Instruction) error {
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return err
	}
	f := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		f[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return e
	}
	return nil
}
