//go:build linux || darwin

package agent

import (
	"os"
	"syscall"
	"time"
)

// changeTime is fi's inode change time, when the system says.
func changeTime(fi os.FileInfo) (time.Time, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return time.Time{}, false
	}
	ts := statCtime(st)
	return time.Unix(ts.Unix()), true
}
