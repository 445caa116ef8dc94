//go:build linux && !amd64 && !arm64

package sandbox

// nativeAuditArch 0: the architecture filter is not built for this
// architecture, and the helper refuses to run (fail closed).
const nativeAuditArch = 0

const x32Bit = 0
