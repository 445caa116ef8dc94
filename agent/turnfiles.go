package agent

import (
	"os"
	"path/filepath"
	"time"
)

// mtimeSlack is how far before the turn's start a file's times may lie
// and still count as written in the turn: the kernel stamps files with a
// coarse clock, up to a tick behind time.Now.
const mtimeSlack = 20 * time.Millisecond

// writtenInTurn returns the risk.Context.WrittenInTurn of a turn that
// started at since in cwd: whether the file at p (relative to cwd, or
// absolute), or the symlink standing there, was modified or had its
// status changed since then. The change time (ctime) counts, which no
// command can set back (touch -d sets only mtime and atime). A file that
// does not exist was not written.
func writtenInTurn(cwd string, since time.Time) func(string) bool {
	since = since.Add(-mtimeSlack)
	return func(p string) bool {
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		for _, stat := range []func(string) (os.FileInfo, error){os.Lstat, os.Stat} {
			fi, err := stat(p)
			if err != nil {
				continue
			}
			if !fi.ModTime().Before(since) {
				return true
			}
			if ct, ok := changeTime(fi); ok && !ct.Before(since) {
				return true
			}
		}
		return false
	}
}
