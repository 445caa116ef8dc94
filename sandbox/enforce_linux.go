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

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// confine builds the command's view in this process's mount namespace and
// confines the calling OS thread as s says: no capability, no_new_privs,
// Landlock, seccomp, every descriptor above 2 close-on-exec. Landlock,
// capabilities and seccomp are per thread: the caller's goroutine is
// locked to the thread (runtime.LockOSThread) for good, and starts the
// command from it, which inherits all of it. On error nothing of the
// command ran; the thread may be partly confined.
func confine(s Spec) error {
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
	pl, err := makePlan(s, dirs)
	if err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private (is this a private mount namespace?): %w", err)
	}
	if err := buildView(s, pl); err != nil {
		return err
	}
	// Enter the cwd in the view: the bind of the directory opened above
	// (a cwd that is a protected directory or the home frozen for its
	// start-up files is the read-only view of it that buildView made).
	if s.Cwd != "" {
		if err := unix.Chdir(s.Cwd); err != nil {
			return fmt.Errorf("chdir %s: %w", s.Cwd, err)
		}
		frozen := slices.Contains(pl.writableHomes, s.Cwd) || slices.ContainsFunc(pl.targets, func(t target) bool { return t.path == s.Cwd })
		if err := sameDir(".", dirs[s.Cwd]); err != nil && !frozen {
			return fmt.Errorf("cwd %s: %w", s.Cwd, err)
		}
	}
	abi, err := ll.LandlockGetABIVersion()
	if err != nil || abi < MinLandlockABI {
		//lint:ignore ST1005 Landlock is a proper noun
		return fmt.Errorf("Landlock ABI %d (error %v): %d or later is needed", abi, err, MinLandlockABI)
	}
	cfg := landlock.V11.BestEffort()
	if s.Policy.Network {
		cfg.HandledAccessNet = 0
	}
	// Writes only in the writable locations as the view shows them, the
	// private /tmp and the devices; named Unix sockets (where the kernel
	// can tell, Landlock ABI 9+) only there too. Each writable location is
	// granted by a descriptor opened without following symlinks, that
	// must be the directory checked at the start (or the read-only view
	// buildView made of it).
	rules := []landlock.Rule{
		landlock.RODirs("/"),
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx").IgnoreIfMissing(),
		landlock.RWDirs("/tmp", "/dev/shm", "/dev/pts").IgnoreIfMissing().WithRefer().WithResolveUnix(),
	}
	for _, w := range s.writable() {
		fd, err := openNoFollow(w)
		if err != nil {
			return fmt.Errorf("writable location %w; nothing was run", err)
		}
		frozen := slices.Contains(pl.writableHomes, w) || slices.ContainsFunc(pl.targets, func(t target) bool { return t.path == w })
		if _, st, err := fdType(fd); err != nil || (!frozen && (uint64(st.Dev) != dirs[w].dev || st.Ino != dirs[w].ino)) {
			return fmt.Errorf("writable location %s changed while the sandbox was set up (renamed or replaced); nothing was run", w)
		}
		rules = append(rules, landlock.RWDirs(fdPath(fd)).WithRefer().WithResolveUnix())
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
	return nil
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

// Mode bits the file-metadata filter looks at.
const (
	modeSetID = unix.S_ISUID | unix.S_ISGID
	// modeDevice is set in S_IFCHR and S_IFBLK, in no other file type.
	modeDevice = 0o020000
)

// seccompPolicy refuses, with EPERM, for this architecture's system
// calls: making a file setuid or setgid (chmod, fchmod, fchmodat,
// fchmodat2 with S_ISUID or S_ISGID; creating one so through open, openat
// or creat with O_CREAT) — a copy of a shell left setuid in the workspace
// would run as the daemon's user for anyone — and creating a device node
// (mknod, mknodat of a character or block device, or of any file with
// S_ISUID or S_ISGID); and the kernel's keyrings (keyctl, add_key,
// request_key). With the network off
// (network false) also socket(2) and socketpair(2) for every family but
// AF_UNIX, and io_uring (which could open sockets past this filter).
func seccompPolicy(network bool) seccomp.Policy {
	bits := func(arg uint32, v uint64) seccomp.ArgumentConditions {
		return seccomp.ArgumentConditions{{Argument: arg, Operation: seccomp.BitsSet, Value: v}}
	}
	created := func(flagsArg, modeArg uint32) seccomp.ArgumentConditions {
		return seccomp.ArgumentConditions{
			{Argument: flagsArg, Operation: seccomp.BitsSet, Value: unix.O_CREAT},
			{Argument: modeArg, Operation: seccomp.BitsSet, Value: modeSetID},
		}
	}
	files := []seccomp.NameWithConditions{
		{Name: "fchmod", Conditions: bits(1, modeSetID)},
		{Name: "fchmodat", Conditions: bits(2, modeSetID)},
		{Name: "fchmodat2", Conditions: bits(2, modeSetID)},
		{Name: "mknodat", Conditions: bits(2, modeDevice|modeSetID)},
		{Name: "openat", Conditions: created(2, 3)},
	}
	files = append(files, legacyFileCalls(bits, created)...)
	p := seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionErrno, NamesWithCondtions: files},
			// The kernel's keyrings are the user's and the daemon's
			// session's, outside every namespace: no key is read or added.
			{Action: seccomp.ActionErrno, Names: []string{"keyctl", "add_key", "request_key"}},
		},
	}
	if network {
		return p
	}
	p.Syscalls = append(p.Syscalls,
		seccomp.SyscallGroup{
			Action: seccomp.ActionErrno,
			NamesWithCondtions: []seccomp.NameWithConditions{
				{Name: "socket", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.NotEqual, Value: unix.AF_UNIX}}},
				{Name: "socketpair", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.NotEqual, Value: unix.AF_UNIX}}},
			},
		},
		seccomp.SyscallGroup{
			Action: seccomp.ActionErrno,
			Names:  []string{"io_uring_setup", "io_uring_enter", "io_uring_register"},
		})
	return p
}

// loadSeccomp loads archFilter (every command: another architecture's or
// an x32 system call kills the process), then seccompPolicy.
// no_new_privs is set.
func loadSeccomp(network bool) error {
	arch, err := archFilter()
	if err != nil {
		return err
	}
	if err := loadRawFilter(arch); err != nil {
		return fmt.Errorf("seccomp architecture filter: %w", err)
	}
	if err := seccomp.LoadFilter(seccomp.Filter{NoNewPrivs: true, Policy: seccompPolicy(network)}); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}
