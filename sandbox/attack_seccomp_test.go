//go:build linux

package sandbox

import (
	"testing"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// TestAttackSeccompForeignArch (adversarial review): loadSeccomp's policy
// (copied here: it is built inside loadSeccomp) is assembled by
// go-seccomp-bpf, whose program jumps straight to the default action,
// ActionAllow, for a system call of another architecture than the
// native one. On x86_64 with IA32 emulation (the default of distribution
// kernels; this CI kernel happens to SIGSEGV on int 0x80) a command
// calls the i386 socket(2) (int 0x80, nr 359) or socketcall(2) (102) and
// gets a UDP/netlink/vsock socket past the filter; Landlock (ABI 7)
// restricts only TCP bind/connect, so UDP reaches the network. A foreign
// architecture should be killed or refused (e.g. DefaultAction for a
// foreign arch = ActionKillProcess, or check the arch in its own group).
func TestAttackSeccompForeignArch(t *testing.T) {
	filter := seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{
				Action: seccomp.ActionErrno,
				NamesWithCondtions: []seccomp.NameWithConditions{
					{Name: "socket", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.NotEqual, Value: unix.AF_UNIX}}},
					{Name: "socketpair", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.NotEqual, Value: unix.AF_UNIX}}},
				},
			},
			{Action: seccomp.ActionErrno, Names: []string{"io_uring_setup", "io_uring_enter", "io_uring_register"}},
		},
	}
	prog, err := filter.Assemble()
	if err != nil {
		t.Fatal(err)
	}
	// The program loads the architecture, then jumps on a foreign one.
	load, ok := prog[0].(bpf.LoadAbsolute)
	jump, ok2 := prog[1].(bpf.JumpIf)
	if !ok || !ok2 || load.Off != 4 || jump.Cond != bpf.JumpNotEqual || jump.Val != unix.AUDIT_ARCH_X86_64 {
		t.Skipf("unexpected program head %v %v: this check needs updating", prog[0], prog[1])
	}
	target := prog[2+int(jump.SkipTrue)]
	ret, ok := target.(bpf.RetConstant)
	if !ok {
		t.Fatalf("a foreign architecture jumps to %v", target)
	}
	if ret.Val == uint32(seccomp.ActionAllow) {
		t.Errorf("a system call of a foreign architecture (i386 socket/socketcall/io_uring_setup through int 0x80) "+
			"jumps to %v = SECCOMP_RET_ALLOW: the filter does not apply to it", ret)
	}
}
