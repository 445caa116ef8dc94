package agent

import (
	"os"
	"syscall"
	"time"
)

// changeTime is fi's inode change time (st_ctimespec), when the system
// says.
func changeTime(fi os.FileInfo) (time.Time, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(st.Ctimespec.Unix()), true
}
