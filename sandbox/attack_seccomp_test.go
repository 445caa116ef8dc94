//go:build linux

package sandbox

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompData is a struct seccomp_data for the BPF VM of x/net/bpf,
// which loads words big-endian (the kernel loads them in host order).
func seccompData(arch uint32, nr uint32) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], nr)
	binary.BigEndian.PutUint32(b[4:], arch)
	return b
}

// TestAttackSeccompForeignArch (adversarial review): go-seccomp-bpf's
// program jumps straight to the default action, ActionAllow, for a system
// call of another architecture than the native one. On x86_64 with IA32
// emulation (the default of distribution kernels; this CI kernel happens
// to SIGSEGV on int 0x80) a command would call the i386 socket(2) (int
// 0x80, nr 359) or socketcall(2) (102) and get a UDP/netlink/vsock socket
// past the filter. The helper therefore loads archFilter first, which
// kills the process on a foreign architecture or an x32 call; the
// library's filter (loaded after it) must then see native calls only.
func TestAttackSeccompForeignArch(t *testing.T) {
	prog, err := archFilter()
	if err != nil {
		t.Fatal(err)
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	foreign := map[string]uint32{"i386": unix.AUDIT_ARCH_I386, "arm": unix.AUDIT_ARCH_ARM, "x86_64": unix.AUDIT_ARCH_X86_64, "aarch64": unix.AUDIT_ARCH_AARCH64}
	for name, arch := range foreign {
		if arch == nativeAuditArch {
			continue
		}
		for _, nr := range []uint32{359, 102, 425, 0} { // socket, socketcall, io_uring_setup (i386), read
			got, err := vm.Run(seccompData(arch, nr))
			if err != nil {
				t.Fatal(err)
			}
			if uint32(got) != unix.SECCOMP_RET_KILL_PROCESS {
				t.Errorf("%s system call %d: action %#x, want SECCOMP_RET_KILL_PROCESS", name, nr, got)
			}
		}
	}
	if x32Bit != 0 {
		got, _ := vm.Run(seccompData(nativeAuditArch, x32Bit|41)) // x32 socket
		if uint32(got) != unix.SECCOMP_RET_KILL_PROCESS {
			t.Errorf("x32 socket: action %#x, want SECCOMP_RET_KILL_PROCESS", got)
		}
	}
	got, _ := vm.Run(seccompData(nativeAuditArch, uint32(unix.SYS_SOCKET)))
	if uint32(got) != unix.SECCOMP_RET_ALLOW {
		t.Errorf("native socket: action %#x, want SECCOMP_RET_ALLOW (the library's filter decides)", got)
	}
}

// The architecture filter is loaded in every sandboxed command, network on
// or off: it shows in /proc/self/status beside the policy's (Seccomp_filters).
func TestArchFilterLoaded(t *testing.T) {
	l := newLayout(t)
	for _, network := range []bool{false, true} {
		s := l.spec(ModeWorkspaceWrite, l.work)
		s.Policy.Network = network
		want := "Seccomp_filters:\t2" // the file-metadata rules are there with the network on too
		out, code := run(t, s, "grep Seccomp_filters /proc/self/status")
		if code != 0 || !slices.Contains(strings.Split(out, "\n"), want) {
			t.Errorf("network %v: %q, want %q", network, out, want)
		}
	}
}
