//go:build linux && !amd64 && !arm64

package sandbox

import seccomp "github.com/elastic/go-seccomp-bpf"

// nativeAuditArch 0: the architecture filter is not built for this
// architecture, and the helper refuses to run (fail closed).
const nativeAuditArch = 0

const x32Bit = 0

// legacyFileCalls: this architecture has only the *at forms.
func legacyFileCalls(func(uint32, uint64) seccomp.ArgumentConditions, func(uint32, uint32) seccomp.ArgumentConditions) []seccomp.NameWithConditions {
	return nil
}
