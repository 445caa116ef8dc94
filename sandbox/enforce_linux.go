package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// enter confines this process as s says and execs /bin/sh -c command. It
// returns only on failure, and then nothing of the command ran.
func enter(s Spec, command string) error {
	// Landlock, capabilities and seccomp are per thread: all of it, and the
	// exec, happen on this one.
	runtime.LockOSThread()
	// The protected directories are the daemon's to name: hide whatever
	// they lead to now. The writable ones were resolved to real paths when
	// the session was created (or the config loaded): they are opened
	// here without following any symlink, and a command that swapped one
	// for a symlink since gets nothing run.
	s.Protected = resolved(Spec{Protected: s.Protected}).Protected
	s, dirs, err := openWritable(s)
	if err != nil {
		return err
	}
	if err := mountNamespace(s); err != nil {
		return err
	}
	// A /proc of the command's own PID namespace: ps shows its processes
	// only, and /proc/self is this process.
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	// Re-enter the cwd: the process still stands in the directory it was
	// started in, beneath any mount placed over it here. It must still be
	// the directory opened above (the mounts did not move it).
	if s.Cwd != "" {
		if err := unix.Chdir(s.Cwd); err != nil {
			return fmt.Errorf("chdir %s: %w", s.Cwd, err)
		}
		// (A cwd that is a protected directory itself is now the read-only
		// view of it that mountNamespace made.)
		if err := sameDir(".", dirs[s.Cwd]); err != nil && !slices.Contains(s.Protected, s.Cwd) {
			return fmt.Errorf("cwd %s: %w", s.Cwd, err)
		}
	}
	abi, err := ll.LandlockGetABIVersion()
	if err != nil || abi < MinLandlockABI {
		return fmt.Errorf("Landlock ABI %d (error %v): %d or later is needed", abi, err, MinLandlockABI)
	}
	cfg := landlock.V11.BestEffort()
	if s.Policy.Network {
		cfg.HandledAccessNet = 0
	}
	rules := []landlock.Rule{
		landlock.RODirs("/").WithResolveUnix(),
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom").IgnoreIfMissing(),
	}
	for _, w := range s.writable() {
		// By the descriptor opened above, not the path: what is granted is
		// the directory that was checked, whatever is renamed since.
		rules = append(rules, landlock.RWDirs(fmt.Sprintf("/proc/self/fd/%d", dirs[w].fd)).WithRefer().WithResolveUnix())
	}
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("landlock ruleset: %w", err)
	}
	if fd < 0 {
		return fmt.Errorf("landlock: nothing could be restricted")
	}
	if err := dropCapabilities(); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock restrict: %w", err)
	}
	unix.Close(fd)
	if err := loadSeccomp(s.Policy.Network); err != nil {
		return err
	}
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("close descriptors: %w", err)
	}
	return syscall.Exec("/bin/sh", []string{"/bin/sh", "-c", command}, os.Environ())
}

// openedDir is a writable directory opened by openWritable.
type openedDir struct {
	fd       int
	dev, ino uint64
}

// ErrSymlinkSwapped is wrapped by the helper's error when the cwd, the
// temp directory or a writable root now has a symlink in its path: they
// were resolved to real paths when the session was created, so a symlink
// there is a command's doing, and following it would make its target
// writable.
var ErrSymlinkSwapped = errors.New("a symlink now stands in its path (it was a real directory when the session was created); nothing was run")

// openWritable opens (O_PATH, no symlink followed in any component:
// openat2 RESOLVE_NO_SYMLINKS) the cwd, the temp directory and every
// writable root of s. It returns s without the writable roots that do not
// exist (they grant nothing) and the opened directories by path. The cwd
// and the temp directory must exist. The descriptors stay open until the
// exec (close-on-exec).
func openWritable(s Spec) (Spec, map[string]openedDir, error) {
	dirs := map[string]openedDir{}
	open := func(what, p string, mayBeMissing bool) (bool, error) {
		if _, ok := dirs[p]; ok {
			return true, nil
		}
		fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		switch {
		case err == nil:
		case errors.Is(err, unix.ENOENT) && mayBeMissing:
			return false, nil // a configured root that does not exist (yet) grants nothing
		case errors.Is(err, unix.ELOOP):
			return false, fmt.Errorf("%s %s: %w", what, p, ErrSymlinkSwapped)
		case errors.Is(err, unix.ENOTDIR):
			return false, fmt.Errorf("%s %s: not a directory (or a symlink now stands in its path); nothing was run", what, p)
		default:
			return false, fmt.Errorf("%s %s: %w", what, p, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return false, fmt.Errorf("%s %s: %w", what, p, err)
		}
		dirs[p] = openedDir{fd: fd, dev: st.Dev, ino: st.Ino}
		return true, nil
	}
	if s.Cwd != "" {
		s.Cwd = filepath.Clean(s.Cwd)
		if _, err := open("cwd", s.Cwd, false); err != nil {
			return s, nil, err
		}
	}
	if s.TempDir != "" {
		s.TempDir = filepath.Clean(s.TempDir)
		if _, err := open("temp directory", s.TempDir, false); err != nil {
			return s, nil, err
		}
	}
	if s.Policy.Mode == ModeWorkspaceWrite {
		roots := []string{}
		for _, r := range s.Policy.WritableRoots {
			r = filepath.Clean(r)
			ok, err := open("writable root", r, true)
			if err != nil {
				return s, nil, err
			}
			if ok {
				roots = append(roots, r)
			}
		}
		s.Policy.WritableRoots = roots
	}
	return s, dirs, nil
}

// sameDir checks that path is the directory d was opened as.
func sameDir(path string, d openedDir) error {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return err
	}
	if st.Dev != d.dev || st.Ino != d.ino {
		return fmt.Errorf("it changed while the sandbox was set up (renamed or replaced); nothing was run")
	}
	return nil
}

// resolved returns s with its paths resolved through symlinks (those that
// exist), so that containment is decided on real paths.
func resolved(s Spec) Spec {
	r := func(p string) string {
		if p == "" {
			return p
		}
		if q, err := filepath.EvalSymlinks(p); err == nil {
			return q
		}
		return filepath.Clean(p)
	}
	s.Cwd, s.TempDir = r(s.Cwd), r(s.TempDir)
	roots := make([]string, len(s.Policy.WritableRoots))
	for i, p := range s.Policy.WritableRoots {
		roots[i] = r(p)
	}
	s.Policy.WritableRoots = roots
	prot := make([]string, len(s.Protected))
	for i, p := range s.Protected {
		prot[i] = r(p)
	}
	s.Protected = prot
	return s
}

// mountNamespace makes every mount private (nothing done here reaches
// the daemon's namespace) and places the protected directories out of
// reach.
func mountNamespace(s Spec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private (is this a private mount namespace?): %w", err)
	}
	writable := s.writable()
	for _, p := range s.Protected {
		p = filepath.Clean(p)
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
			continue // nothing there to protect; it cannot be created in a read-only parent either way
		}
		// Pin every directory between a writable location and p as a
		// mount point, outermost first, so that none can be renamed or
		// removed (EBUSY) and p stays where the daemon looks for it.
		for _, w := range writable {
			if !Within(p, w) || p == filepath.Clean(w) {
				continue
			}
			var chain []string
			for d := filepath.Dir(p); d != filepath.Clean(w) && d != "/" && Within(d, w); d = filepath.Dir(d) {
				chain = append(chain, d)
			}
			slices.Reverse(chain)
			for _, d := range chain {
				if err := bindSelf(d); err != nil {
					return err
				}
			}
		}
		var inside []string
		for _, w := range writable {
			if Within(w, p) {
				inside = append(inside, filepath.Clean(w))
			}
		}
		if len(inside) == 0 {
			// Nothing writable lies in p: hide it whole.
			if err := unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0500,size=4k"); err != nil {
				return fmt.Errorf("hide %s: %w", p, err)
			}
			continue
		}
		// A writable location lies in p (the session's cwd is p or beneath
		// it): keep those writable, freeze the rest of p read-only, and
		// leave its secrets out. Not covers on the secrets' own names: the
		// daemon replaces daemon.json by rename, which removes a mount on
		// the old name from every namespace. Instead p becomes a read-only
		// tmpfs holding p's entries as bind mounts (taken through a
		// descriptor of the real p), and the secrets as empty files of
		// its own, which no rename in the real p reaches.
		for _, w := range inside {
			if w == p {
				continue
			}
			if err := bindSelf(w); err != nil {
				return err
			}
		}
		if err := viewWithout(p, s.CoveredFiles, inside); err != nil {
			return err
		}
	}
	return nil
}

// viewWithout replaces p, in this mount namespace, by a read-only tmpfs
// that holds every entry of p bound (recursively, read-only but for the
// writable locations among them, which keep their own mounts) from the
// real directory, except the names in covered, which are empty read-only
// files or directories of the tmpfs. Entries created in p later do not
// show.
func viewWithout(p string, covered, writable []string) error {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", p, err)
	}
	defer unix.Close(fd)
	ents, err := os.ReadDir(p)
	if err != nil {
		return fmt.Errorf("list %s: %w", p, err)
	}
	if err := unix.Mount("tmpfs", p, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("hide %s: %w", p, err)
	}
	real := fmt.Sprintf("/proc/self/fd/%d", fd)
	for _, e := range ents {
		name := e.Name()
		dst := filepath.Join(p, name)
		src := filepath.Join(real, name)
		switch {
		case slices.Contains(covered, name) && e.IsDir():
			err = os.Mkdir(dst, 0o500)
		case slices.Contains(covered, name):
			err = os.WriteFile(dst, nil, 0o400)
		case e.Type()&os.ModeSymlink != 0:
			var t string
			if t, err = os.Readlink(src); err == nil {
				err = os.Symlink(t, dst)
			}
		default:
			if e.IsDir() {
				err = os.Mkdir(dst, 0o755)
			} else {
				err = os.WriteFile(dst, nil, 0o600)
			}
			if err == nil {
				err = unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, "")
			}
			if err == nil && !slices.Contains(writable, dst) {
				err = remountReadOnly(dst)
			}
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) { // gone since the listing: leave it out
			return fmt.Errorf("view of %s: %s: %w", p, name, err)
		}
	}
	return remountReadOnly(p)
}

// bindSelf bind-mounts d (recursively) onto itself: d becomes a mount
// point, which cannot be renamed or removed.
func bindSelf(d string) error {
	if err := unix.Mount(d, d, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", d, err)
	}
	return nil
}

// remountReadOnly makes the bind mount at p read-only, keeping the flags
// the kernel locks (nosuid, nodev, noexec, atime) as they are.
func remountReadOnly(p string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", p, err)
	}
	keep := uintptr(st.Flags) & (unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_NOATIME | unix.MS_NODIRATIME | unix.MS_RELATIME)
	if err := unix.Mount("", p, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|keep, ""); err != nil {
		return fmt.Errorf("remount %s read-only: %w", p, err)
	}
	return nil
}

// dropCapabilities empties the bounding and ambient sets, then the
// inheritable, permitted and effective ones: even root keeps no
// capability across the exec (no CAP_SYS_PTRACE to read a non-dumpable
// daemon's /proc files, no CAP_KILL, no CAP_DAC_OVERRIDE, no mounts).
func dropCapabilities() error {
	last := 63
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			last = n
		}
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("drop capabilities: %w", err)
	}
	return nil
}

// seccompPolicy refuses, with EPERM, socket(2) and socketpair(2) for
// every family but AF_UNIX, and io_uring (which could open sockets past
// this filter), for this architecture's system calls.
func seccompPolicy() seccomp.Policy {
	return seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{
				Action: seccomp.ActionErrno,
				NamesWithCondtions: []seccomp.NameWithConditions{
					{Name: "socket", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.NotEqual, Value: unix.AF_UNIX}}},
					{Name: "socketpair", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.NotEqual, Value: unix.AF_UNIX}}},
				},
			},
			{
				Action: seccomp.ActionErrno,
				Names:  []string{"io_uring_setup", "io_uring_enter", "io_uring_register"},
			},
		},
	}
}

// loadSeccomp loads archFilter (every command: another architecture's or
// an x32 system call kills the process) and, with the network off,
// seccompPolicy after it. no_new_privs is set.
func loadSeccomp(network bool) error {
	arch, err := archFilter()
	if err != nil {
		return err
	}
	if err := loadRawFilter(arch); err != nil {
		return fmt.Errorf("seccomp architecture filter: %w", err)
	}
	if network {
		return nil
	}
	if err := seccomp.LoadFilter(seccomp.Filter{NoNewPrivs: true, Policy: seccompPolicy()}); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}
