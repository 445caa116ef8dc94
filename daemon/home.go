package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sessiond/sessiond/protocol"
)

// File names inside the home directory (PROTOCOL.md section 1).
const (
	ConfigFile     = protocol.ConfigFile
	StateFile      = protocol.StateFile
	DescriptorFile = protocol.DescriptorFile
	LockFile       = protocol.LockFile
)

// ResolveHome picks the home directory (protocol.ResolveHome): flag, else
// $SESSIOND_HOME, else $XDG_STATE_HOME/sessiond, else
// ~/.local/state/sessiond. The result is absolute.
func ResolveHome(flag string) (string, error) { return protocol.ResolveHome(flag) }

// PrepareHome creates home with mode 0700 (and tightens an existing one
// that is group- or world-accessible).
func PrepareHome(home string) error {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("create home %s: %w", home, err)
	}
	st, err := os.Stat(home)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("home %s is not a directory", home)
	}
	if st.Mode().Perm() != 0o700 {
		if err := os.Chmod(home, 0o700); err != nil {
			return fmt.Errorf("home %s: set mode 0700: %w", home, err)
		}
	}
	return nil
}

// ErrHomeLocked means another live daemon owns the home.
var ErrHomeLocked = errors.New("home is locked by another sessiond")

// HomeLock is the exclusive flock(2) on HOME/daemon.lock. The kernel drops
// it when the owning process dies, so a lock left by a killed daemon is
// simply taken over.
type HomeLock struct{ f *os.File }

// LockHome takes the home lock without waiting. When another process holds
// it, the error wraps ErrHomeLocked and names that daemon's pid from the
// descriptor when it can.
func LockHome(home string) (*HomeLock, error) {
	f, err := os.OpenFile(filepath.Join(home, LockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			if d, derr := ReadDescriptor(home); derr == nil {
				return nil, fmt.Errorf("%w: %s is owned by sessiond pid %d (%s)", ErrHomeLocked, home, d.PID, d.URL)
			}
			return nil, fmt.Errorf("%w: %s", ErrHomeLocked, home)
		}
		return nil, fmt.Errorf("lock %s: %w", home, err)
	}
	f.Truncate(0)
	fmt.Fprintf(f, "%d\n", os.Getpid())
	return &HomeLock{f: f}, nil
}

// Release drops the lock.
func (l *HomeLock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	err := l.f.Close()
	l.f = nil
	return err
}

// Descriptor is daemon.json, how clients find and authenticate to the
// daemon (protocol.Descriptor).
type Descriptor = protocol.Descriptor

// WriteDescriptor writes HOME/daemon.json with mode 0600 atomically: a
// temporary file in the same directory, fsync, rename, fsync of the
// directory. A stale descriptor is replaced.
func WriteDescriptor(home string, d Descriptor) error {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(home, ".daemon.json.*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(home, DescriptorFile)); err != nil {
		return err
	}
	if dir, err := os.Open(home); err == nil {
		dir.Sync()
		dir.Close()
	}
	return nil
}

// ReadDescriptor reads HOME/daemon.json (protocol.ReadDescriptor).
func ReadDescriptor(home string) (Descriptor, error) { return protocol.ReadDescriptor(home) }

// RemoveDescriptor removes HOME/daemon.json if it still names pid.
func RemoveDescriptor(home string, pid int) error {
	if d, err := ReadDescriptor(home); err == nil && d.PID != pid {
		return nil
	}
	err := os.Remove(filepath.Join(home, DescriptorFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// diskFullHint returns "; the file system of DIR has only N bytes free"
// when dir's file system has less than 1 MiB available, else "". SQLite
// reports a full disk met while opening (recovering the WAL, creating the
// shared-memory file) as a plain disk I/O error; this says why.
func diskFullHint(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return ""
	}
	if free := st.Bavail * uint64(st.Bsize); free < 1<<20 {
		return fmt.Sprintf("; the file system of %s has only %d bytes free", dir, free)
	}
	return ""
}
