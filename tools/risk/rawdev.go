package risk

import (
	"fmt"
	"path"
	"strings"
)

// Raw filesystem access: tools that read or edit a filesystem through
// its device or image, and plain readers of a block device, see every
// file on it whatever its permissions and whatever mounts hide it.

// fsDebuggers read or edit a filesystem below its files.
var fsDebuggers = set("debugfs", "xfs_db", "e2image", "ntfscat", "ntfsls", "ntfscluster", "icat", "fls", "istat", "ifind", "blkcat", "fsstat", "jls", "btrfs-debug-tree", "zdb")

// deviceReaders copy or show the bytes of the files they are given.
var deviceReaders = set("cat", "dd", "strings", "head", "tail", "xxd", "hexdump", "hd", "od", "less", "more", "grep", "egrep", "fgrep", "rg",
	"cp", "base64", "gzip", "zstd", "xz", "bzip2", "pv", "tar", "cpio", "sha256sum", "md5sum", "cmp", "nc", "ssh", "curl")

// rawDevice flags a filesystem debugger, and a reader given a block
// device as an operand, as dd's if= or on its standard input.
func (c *classifier) rawDevice(name string, args []arg, cx cmdCtx) {
	if fsDebuggers[name] {
		c.add(RiskDangerous, KeyRawDeviceRead, fmt.Sprintf("reads or edits a filesystem through its device or image (%s)", name))
		return
	}
	if cx.stdinFile != nil && isBlockDevice(cx.stdinFile.s) {
		c.add(RiskDangerous, KeyRawDeviceRead, fmt.Sprintf("reads a block device (%s < %s)", name, cx.stdinFile.s))
		return
	}
	if !deviceReaders[name] {
		return
	}
	for _, a := range args {
		p := a.s
		if name == "dd" {
			v, ok := strings.CutPrefix(p, "if=")
			if !ok {
				continue
			}
			p = v
		}
		if isBlockDevice(p) {
			c.add(RiskDangerous, KeyRawDeviceRead, fmt.Sprintf("reads a block device (%s %s)", name, a.s))
			return
		}
	}
}

func isBlockDevice(p string) bool {
	return strings.HasPrefix(p, "/dev/") && blockDevices.MatchString(path.Clean(p))
}
