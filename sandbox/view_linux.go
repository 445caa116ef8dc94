package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The command's filesystem view. It is built from nothing: a tmpfs becomes
// the root (pivot_root), and only what a command may use is bound into it,
// each at its real path:
//
//	what                                  how
//	SystemTrees (/usr, /bin, /etc, …)     read-only (symlinks among them copied)
//	the user's home (Spec.Home)           read-only, CredentialStores left out
//	Policy.ReadableRoots, $PATH entries   read-only (a bin, sbin or shims
//	                                      entry: its parent, the tool's root)
//	the cwd, Policy.WritableRoots         read-write (workspace-write only)
//	/tmp                                  a private tmpfs holding $TMPDIR
//	/dev                                  null zero full random urandom tty, pts, shm
//	/proc                                 fresh, of the command's PID namespace
//	where /etc/resolv.conf leads          read-only, with the network on
//	everything else (/run, /var, /home    not there
//	  of others, /mnt, other mounts)
//
// Every mount is nosuid and nodev (but the device nodes), and read-only
// at the mount level outside the writable locations, so chmod, utime and
// xattr changes fail there as writes do. Then the daemon's secrets are
// covered wherever they show: the protected directories (Spec.Protected)
// and files (Spec.HiddenFiles), also where a bind mount or a second mount
// of their file system shows them under another path, SystemSecrets, and
// in workspace-write .git/config, .git/hooks and the home's StartupFiles
// stay read-only. Any error fails closed: nothing runs.

// SystemTrees are the root's directories bound read-only into every view
// when they exist.
var SystemTrees = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/sys", "/nix"}

// CredentialStores are paths, relative to the user's home, left out of the
// view unless a Policy.ReadableRoots entry is the store or contains it.
var CredentialStores = []string{
	".ssh", ".aws", ".gnupg", ".config/gh", ".netrc", ".docker", ".kube",
	".pgpass", ".git-credentials", ".config/git/credentials", ".config/gcloud", ".azure",
	".password-store", ".local/share/keyrings", ".vault-token", ".npmrc", ".pypirc",
	".cargo/credentials", ".cargo/credentials.toml", ".terraform.d/credentials.tfrc.json",
	".config/op", ".config/hub",
	// Other AI agents' credentials and session stores.
	".claude", ".claude.json", ".codex", ".gemini", ".config/github-copilot", ".aider.conf.yml",
	// Where same-user services keep their sockets (Docker Desktop, Rancher
	// Desktop, Colima, Lima, OrbStack, Podman machines).
	".rd", ".colima", ".lima", ".orbstack", ".local/share/containers/podman/machine",
}

// SystemSecrets are files of the system trees no command reads (shell
// globs, absolute).
var SystemSecrets = []string{"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
	"/etc/security/opasswd", "/etc/ssh/ssh_host_*_key"}

// StartupFiles are paths, relative to the user's home, that run code in a
// person's next shell or tool: read-only when a writable location contains
// the home, whose top level then takes no new entry either (so none of
// them can be created).
var StartupFiles = []string{
	".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
	".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout", ".cshrc", ".tcshrc", ".login",
	".kshrc", ".mkshrc", ".inputrc", ".xprofile", ".xsessionrc", ".xinitrc", ".pam_environment",
	".bash_aliases", ".bashrc.d", ".xonshrc", ".vimrc", ".gvimrc", ".exrc", ".vim", ".emacs", ".emacs.d",
	".tmux.conf", ".screenrc", ".wgetrc", ".curlrc", ".npmrc", ".pythonrc", ".Rprofile",
	".gitconfig", ".config/git", ".config/fish", ".config/systemd", ".config/autostart",
	".config/environment.d", ".config/nvim", ".config/tmux", ".config/nushell", ".config/bash",
	".config/zsh", ".local/bin", ".local/share/applications",
	".bash_completion", ".bash_completion.d", ".local/share/bash-completion", ".gdbinit", ".lldbinit",
	".psqlrc", ".sqliterc", ".irbrc", ".pryrc", ".guile", ".Renviron", ".octaverc", ".ipython",
	".local/lib", // Python's user site-packages: a .pth file runs in every python
}

// sharedTempDirs are directories shared by every user and session: no
// writable location may be or contain one (the view's /tmp is private).
var sharedTempDirs = []string{"/tmp", "/var/tmp", "/dev/shm"}

// holdsShared reports whether p is or contains one of the sharedTempDirs:
// such a tree is never bound into a view, not even read-only (other
// sessions' temp directories, other users' sockets).
func holdsShared(p string) bool {
	return slices.ContainsFunc(sharedTempDirs, func(d string) bool { return Within(d, p) })
}

// viewRoot is where the new root is mounted before pivot_root: /tmp is
// covered by it until the pivot moves it to /, and the real /tmp shows
// again under the old root.
const viewRoot = "/tmp"

// oldRoot is where pivot_root puts the old root, detached before the exec.
const oldRoot = "/.sessiond-oldroot"

// emptyFile is the read-only empty file of the view bound over covered
// files.
const emptyFile = "/.sessiond-empty"

// source is a path of the old root opened for the view: a directory or
// file opened O_PATH without following a symlink in any component, or a
// symlink to copy.
type source struct {
	path string // the real path, and where it shows in the view
	fd   int    // O_PATH descriptor; -1 for a symlink
	link string // the symlink's target
	dir  bool
	rw   bool
}

// target is something that must not show in the view: where it is, and
// which file system and path within it, to find aliases.
type target struct {
	path string
	dir  bool
	dev  string // mountinfo major:minor of its file system
	rel  string // its path within that file system
	// stDev and ino are its stat(2) identity when planned: the file
	// covered at its path must still be that one.
	stDev, ino uint64
}

// plan is everything the view needs, gathered in the old root.
type plan struct {
	binds   []source
	targets []target
	// writable are the writable locations (cwd, roots, the temp dir).
	writable []string
	// home is the user's home bound read-only ($HOME); writableHomes are
	// the user's homes ($HOME and the password database's) that a
	// writable location contains, whose start-up files freezeHome keeps.
	home          string
	writableHomes []string
	credentials   []string // absolute credential stores to leave out
	covered       []string // CoveredFiles
	// tempParent is the directory holding the commands' temp directories
	// unless it is /tmp (private in the view): shown with only this
	// command's.
	tempParent, tempDir string
	// viewDevs are the devices of the view's own tmpfs mounts (its root
	// and /tmp): a directory there is a skeleton made to hold a mount
	// point, which shows nothing of a target at the same path.
	viewDevs []uint64
}

// openSource opens p (a real path) for the view; a missing path, or one
// this user cannot reach, gives ok false when mayBeMissing, else an
// error.
func openSource(p string, rw, mayBeMissing bool) (source, bool, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	switch {
	case err == nil:
	case (errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EACCES)) && mayBeMissing:
		return source{}, false, nil // nothing there, or nothing this user could read: not in the view
	case errors.Is(err, unix.ELOOP):
		return source{}, false, fmt.Errorf("%s: %w", p, ErrSymlinkSwapped)
	default:
		return source{}, false, fmt.Errorf("%s: %w", p, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return source{}, false, fmt.Errorf("%s: %w", p, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK { // the last component (O_NOFOLLOW|O_PATH opens the link)
		unix.Close(fd)
		if mayBeMissing {
			return source{}, false, nil
		}
		return source{}, false, fmt.Errorf("%s: %w", p, ErrSymlinkSwapped)
	}
	return source{path: p, fd: fd, dir: st.Mode&unix.S_IFMT == unix.S_IFDIR, rw: rw}, true, nil
}

// makePlan gathers, in the old root, the sources of the view and the
// targets to cover. dirs are the writable locations opened by
// openWritable.
func makePlan(s Spec, dirs map[string]openedDir) (*plan, error) {
	pl := &plan{covered: s.CoveredFiles}
	mounts, err := readMountinfo("/proc/thread-self/mountinfo")
	if err != nil {
		return nil, err
	}
	for _, t := range SystemTrees {
		fi, err := os.Lstat(t)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			return nil, fmt.Errorf("system tree %s: %w", t, err)
		case fi.Mode()&os.ModeSymlink != 0:
			l, err := os.Readlink(t)
			if err != nil {
				return nil, fmt.Errorf("system tree %s: %w", t, err)
			}
			pl.binds = append(pl.binds, source{path: t, fd: -1, link: l})
			continue
		}
		src, ok, err := openSource(t, false, true)
		if err != nil {
			return nil, fmt.Errorf("system tree %w", err)
		}
		if ok {
			pl.binds = append(pl.binds, src)
		}
	}
	readable := []string{}
	if s.Home != "" && filepath.IsAbs(s.Home) && filepath.Clean(s.Home) != "/" {
		pl.home = RealPath(s.Home)
		readable = append(readable, pl.home)
	}
	for _, r := range s.Policy.ReadableRoots {
		readable = append(readable, RealPath(r))
	}
	if s.Policy.Mode == ModeReadOnly {
		// What workspace-write would let it write, it may read.
		if s.Cwd != "" {
			readable = append(readable, s.Cwd)
		}
		readable = append(readable, s.Policy.WritableRoots...)
	}
	for _, p := range filepath.SplitList(os.Getenv("PATH")) {
		if !filepath.IsAbs(p) {
			continue
		}
		// A tool's bin directory needs the rest of its root (pyenv's
		// shims run its libexec, Go's bin its pkg).
		r := RealPath(p)
		if b := filepath.Base(r); (b == "bin" || b == "sbin" || b == "shims") && !holdsShared(filepath.Dir(r)) {
			r = filepath.Dir(r)
		}
		readable = append(readable, r)
	}
	if s.Policy.Network {
		// With the network on, name resolution must work: where
		// /etc/resolv.conf leads out of the system trees (systemd-resolved's
		// /run/systemd/resolve), that directory is read-only in the view.
		if r, err := filepath.EvalSymlinks("/etc/resolv.conf"); err == nil && r != "/etc/resolv.conf" {
			readable = append(readable, filepath.Dir(r))
		}
	}
	writable := s.writable()
	pl.writable = writable
	for _, w := range writable {
		if w == filepath.Clean(s.TempDir) {
			continue
		}
		for _, shared := range sharedTempDirs {
			if Within(shared, w) {
				return nil, fmt.Errorf("%s cannot be a writable location: it holds the shared %s (other sessions' temp directories, other users' sockets); nothing was run", w, shared)
			}
		}
	}
	if s.TempDir != "" {
		// (Only /tmp itself is private: a parent below it may show
		// through a bound tree, a home under /tmp, say.)
		if d := filepath.Dir(filepath.Clean(s.TempDir)); d != "/tmp" && d != "/" {
			pl.tempParent, pl.tempDir = d, filepath.Clean(s.TempDir)
		}
	}
	// Read-only sources: those inside a system tree, a writable location
	// or another read-only source are there already.
	covering := func(p string, list []string) bool {
		return slices.ContainsFunc(list, func(q string) bool { return q != p && Within(p, q) })
	}
	for _, r := range readable {
		if r == "/" || holdsShared(r) || covering(r, SystemTrees) || covering(r, writable) || covering(r, readable) ||
			slices.ContainsFunc(pl.binds, func(b source) bool { return b.path == r }) {
			continue
		}
		src, ok, err := openSource(r, false, true)
		if err != nil {
			return nil, fmt.Errorf("readable %w", err)
		}
		if ok {
			pl.binds = append(pl.binds, src)
		}
	}
	for _, w := range writable {
		if filepath.Clean(w) == "/" {
			return nil, errors.New("a writable location of / cannot be sandboxed; nothing was run")
		}
		d, ok := dirs[w]
		if !ok {
			return nil, fmt.Errorf("writable location %s was not opened", w)
		}
		fd, err := unix.Dup(d.fd)
		if err != nil {
			return nil, err
		}
		unix.CloseOnExec(fd)
		pl.binds = append(pl.binds, source{path: w, fd: fd, dir: true, rw: true})
	}
	// The stores of the home in $HOME and of the user's home in the
	// password database (a $PATH root may lie there, and it is the home
	// when $HOME is unset or /), at their paths and where a symlink of the
	// person's (~/.ssh -> dotfiles/ssh) leads.
	homes := []string{}
	if pl.home != "" {
		homes = append(homes, pl.home)
	}
	if u, err := user.Current(); err == nil && filepath.IsAbs(u.HomeDir) && u.HomeDir != "/" && RealPath(u.HomeDir) != pl.home {
		homes = append(homes, RealPath(u.HomeDir))
	}
	for _, h := range homes {
		if slices.ContainsFunc(writable, func(w string) bool { return w != filepath.Clean(s.TempDir) && Within(h, w) }) {
			pl.writableHomes = append(pl.writableHomes, h)
		}
		for _, c := range CredentialStores {
			for _, p := range []string{filepath.Join(h, c), RealPath(filepath.Join(h, c))} {
				if slices.Contains(pl.credentials, p) ||
					slices.ContainsFunc(s.Policy.ReadableRoots, func(r string) bool { return Within(p, RealPath(r)) }) ||
					slices.Contains(writable, p) { // the person made the store itself the cwd or a root
					continue
				}
				pl.credentials = append(pl.credentials, p)
			}
		}
	}
	// Targets: the daemon's, to cover wherever they show.
	add := func(p string, dir bool) error {
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOTDIR):
			return nil // nothing there to protect
		case err != nil:
			// chmod 000 on a parent, say: it cannot be told whether the
			// view shows it, so nothing runs.
			return fmt.Errorf("protected %s cannot be checked (%w); nothing was run", p, err)
		case dir && !fi.IsDir():
			return nil
		}
		m := mountOf(mounts, p)
		if m == nil {
			return fmt.Errorf("protected %s: no mount holds it", p)
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		if st == nil {
			return fmt.Errorf("protected %s: no stat", p)
		}
		pl.targets = append(pl.targets, target{path: p, dir: fi.IsDir(), dev: m.dev, rel: joinRel(m.root, p, m.mountpoint),
			stDev: uint64(st.Dev), ino: st.Ino})
		return nil
	}
	for _, p := range s.Protected {
		if err := add(filepath.Clean(p), true); err != nil {
			return nil, err
		}
	}
	for _, p := range s.HiddenFiles {
		if err := add(RealPath(p), false); err != nil {
			return nil, err
		}
	}
	return pl, nil
}

// buildView makes the view of pl this process's root. The mounts are
// private already.
func buildView(s Spec, pl *plan) error {
	if err := unix.Mount("sessiond-view", viewRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return fmt.Errorf("view root: %w", err)
	}
	if err := os.Mkdir(viewRoot+oldRoot, 0o700); err != nil {
		return fmt.Errorf("view root: %w", err)
	}
	if err := unix.PivotRoot(viewRoot, viewRoot+oldRoot); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	// A /proc of the command's own PID namespace (ps shows its processes
	// only): mounted while the old /proc still shows, which a user
	// namespace requires.
	if err := os.Mkdir("/proc", 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	if err := os.WriteFile(emptyFile, nil, 0o400); err != nil {
		return err
	}
	// /tmp before the sources: the temp directory and a cwd beneath it are
	// bound into it.
	if err := os.Mkdir("/tmp", 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
		return fmt.Errorf("private /tmp: %w", err)
	}
	for _, d := range []string{"/", "/tmp"} {
		var st unix.Stat_t
		if err := unix.Stat(d, &st); err != nil {
			return err
		}
		pl.viewDevs = append(pl.viewDevs, uint64(st.Dev))
	}
	binds := slices.Clone(pl.binds)
	slices.SortStableFunc(binds, func(a, b source) int { return strings.Count(a.path, "/") - strings.Count(b.path, "/") })
	for _, b := range binds {
		if err := bindSource(b); err != nil {
			return err
		}
	}
	if err := makeDev(); err != nil {
		return err
	}
	if s.Policy.Mode == ModeWorkspaceWrite {
		if err := freezeRepos(pl); err != nil {
			return err
		}
	}
	if err := freezeHome(pl); err != nil {
		return err
	}
	if err := coverAll(pl); err != nil {
		return err
	}
	if err := unix.Unmount(oldRoot, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the old root: %w", err)
	}
	if err := os.Remove(oldRoot); err != nil {
		return err
	}
	return setattr("/", false, true, true)
}

// bindSource places b in the view at b.path: by descriptor, onto a
// target opened without following symlinks (targetFor).
func bindSource(b source) error {
	if b.fd < 0 {
		if err := os.MkdirAll(filepath.Dir(b.path), 0o755); err != nil {
			return fmt.Errorf("view: %w", err)
		}
		return os.Symlink(b.link, b.path)
	}
	t, err := targetFor(b.path, b.dir)
	if err != nil {
		return err
	}
	defer unix.Close(t)
	if err := bindOnto(b.fd, t, mountAttr(!b.rw, true, false)); err != nil {
		return fmt.Errorf("bind %s: %w", b.path, err)
	}
	return nil
}

// fdPath names descriptor fd for mount(2) and open(2).
func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// setattr sets nosuid and nodev (when safe) and, when ro, read-only on the
// mount at p; recursive, on every mount beneath it too.
func setattr(p string, recursive, ro, safe bool) error {
	var attr uint64
	if safe {
		attr |= unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	}
	if ro {
		attr |= unix.MOUNT_ATTR_RDONLY
	}
	var flags uint
	if recursive {
		flags = unix.AT_RECURSIVE
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, p, flags|unix.AT_SYMLINK_NOFOLLOW, &unix.MountAttr{Attr_set: attr}); err != nil {
		return fmt.Errorf("mount attributes of %s: %w", p, err)
	}
	return nil
}

// devices are the device nodes of the view's /dev, bound from the real
// /dev.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// makeDev builds a minimal /dev: the devices, a private devpts (ptmx),
// /dev/shm and the fd links; no block device, nothing else.
func makeDev() error {
	if err := os.Mkdir("/dev", 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755"); err != nil {
		return fmt.Errorf("/dev: %w", err)
	}
	for _, d := range devices {
		src := oldRoot + "/dev/" + d
		if _, err := os.Stat(src); err != nil {
			continue
		}
		dst := "/dev/" + d
		if err := os.WriteFile(dst, nil, 0o600); err != nil {
			return err
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("/dev/%s: %w", d, err)
		}
	}
	if err := os.Mkdir("/dev/pts", 0o755); err != nil {
		return err
	}
	if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err == nil {
		if err := os.Symlink("pts/ptmx", "/dev/ptmx"); err != nil {
			return err
		}
	}
	if err := os.Mkdir("/dev/shm", 0o1777); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
		return fmt.Errorf("/dev/shm: %w", err)
	}
	for name, to := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(to, "/dev/"+name); err != nil {
			return err
		}
	}
	return setattr("/dev", false, true, false)
}

// freezeRepos keeps the .git/config and .git/hooks of every repository in
// the writable locations (findRepos) read-only, and .git where it is: a
// command that wrote them would run code in the person's next git
// command, outside the sandbox. A .git that is a file (a worktree's or a
// submodule's "gitdir:") is kept read-only itself. Each is opened without
// following symlinks and mounted on by descriptor; a .git that is a
// symlink, or a config or hooks that is one, fails closed.
func freezeRepos(pl *plan) error {
	repos, err := findRepos(pl.writable)
	if err != nil {
		return err
	}
	for _, git := range repos {
		if err := freezeRepo(git); err != nil {
			return err
		}
	}
	return nil
}

// freezeRepo freezes one .git (see freezeRepos).
func freezeRepo(git string) error {
	g, err := openNoFollow(git)
	if errors.Is(err, unix.ENOENT) {
		return nil // gone since the search
	}
	if err != nil {
		return fmt.Errorf("%s: %w; nothing was run", git, err)
	}
	defer unix.Close(g)
	typ, _, err := fdType(g)
	switch {
	case err != nil:
		return err
	case typ == unix.S_IFREG:
		return bindSelf(g, git, true)
	case typ != unix.S_IFDIR:
		return fmt.Errorf("%s: %w", git, ErrSymlinkSwapped)
	}
	if err := unix.Mkdirat(g, "hooks", 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("%s/hooks: %w", git, err)
	}
	for _, name := range []string{"config", "hooks"} {
		f, err := openAt(g, name, unix.RESOLVE_BENEATH)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s/%w; nothing was run", git, err)
		}
		typ, _, _ := fdType(f)
		if typ == unix.S_IFLNK {
			unix.Close(f)
			return fmt.Errorf("%s/%s: %w", git, name, ErrSymlinkSwapped)
		}
		err = bindSelf(f, filepath.Join(git, name), true)
		unix.Close(f)
		if err != nil {
			return err
		}
	}
	// .git itself a mount point (its clone holds the two read-only
	// mounts): it cannot be renamed or removed and replaced by a copy
	// with another config (EBUSY).
	return bindSelf(g, git, false)
}

// bindSelf binds what fd refers to onto itself (a mount point, which
// cannot be renamed or removed), read-only when ro, nosuid and nodev.
func bindSelf(fd int, p string, ro bool) error {
	if err := bindOnto(fd, fd, mountAttr(ro, true, false)); err != nil {
		return fmt.Errorf("bind %s: %w", p, err)
	}
	return nil
}

// The search for repositories in the writable locations: their own
// .git, every directory directly below them (at most repoSearchWide: more
// fails closed, as a command could make many to hide one), and, as far as
// repoSearchDeep lookups go, the directories below those.
const (
	repoSearchWide = 4096
	repoSearchDeep = 4096
)

// findRepos returns the .git entries (directories or files) of the
// writable locations, of every directory directly below them, and of
// those below these as far as repoSearchDeep lookups go (hidden
// directories and node_modules skipped; symlinks not followed).
func findRepos(writable []string) ([]string, error) {
	var out []string
	check := func(dir string) {
		if fi, err := os.Lstat(filepath.Join(dir, ".git")); err == nil && (fi.IsDir() || fi.Mode().IsRegular()) {
			out = append(out, filepath.Join(dir, ".git"))
		}
	}
	subdirs := func(dir string) []string {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil
		}
		var ds []string
		for _, e := range ents {
			if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && e.Name() != "node_modules" {
				ds = append(ds, filepath.Join(dir, e.Name()))
			}
		}
		return ds
	}
	deep := repoSearchDeep
	for _, w := range writable {
		check(w)
		subs := subdirs(w)
		if len(subs) > repoSearchWide {
			return nil, fmt.Errorf("%s holds more than %d directories: the sandbox cannot check each for a repository's .git/config and hooks; nothing was run", w, repoSearchWide)
		}
		for _, d := range subs {
			check(d)
		}
		for _, d := range subs {
			for _, dd := range subdirs(d) {
				if deep <= 0 {
					break
				}
				deep--
				check(dd)
			}
		}
	}
	return out, nil
}

// freezeHome, for each of the user's homes ($HOME and the password
// database's) that a writable location contains, makes its StartupFiles
// read-only and its top level closed to new entries (so none of them can
// be created): a view of its entries on a read-only tmpfs, each bound
// from the real directory as it was. The nested start-up directories
// (.config/systemd, .local/bin, …) are made, empty, where their parent
// exists, and bound read-only.
func freezeHome(pl *plan) error {
	top := map[string]bool{}
	for _, f := range StartupFiles {
		if !strings.Contains(f, "/") {
			top[f] = true
		}
	}
	for _, home := range pl.writableHomes {
		h, err := openNoFollow(home)
		if err != nil {
			return fmt.Errorf("home %w; nothing was run", err)
		}
		err = freeze(h, home, func(name string) entryMode {
			if top[name] {
				return entryReadOnly
			}
			return entryKeep
		})
		unix.Close(h)
		if err != nil {
			return err
		}
		for _, f := range StartupFiles {
			if !strings.Contains(f, "/") {
				continue
			}
			if err := freezeNested(filepath.Join(home, f)); err != nil {
				return err
			}
		}
	}
	return nil
}

// freezeNested binds the start-up directory p read-only, made empty
// first when its parent exists and it does not.
func freezeNested(p string) error {
	parent, err := openNoFollow(filepath.Dir(p))
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w; nothing was run", err)
	}
	defer unix.Close(parent)
	name := filepath.Base(p)
	if err := unix.Mkdirat(parent, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("%s: %w", p, err)
	}
	f, err := openAt(parent, name, unix.RESOLVE_BENEATH)
	if err != nil {
		return fmt.Errorf("%w; nothing was run", err)
	}
	defer unix.Close(f)
	if typ, _, _ := fdType(f); typ == unix.S_IFLNK {
		return fmt.Errorf("%s: %w", p, ErrSymlinkSwapped)
	}
	return bindSelf(f, p, true)
}

// coverAll leaves out of the view the credential stores, the system
// secrets and the targets, wherever they show.
func coverAll(pl *plan) error {
	for _, c := range pl.credentials {
		if err := cover(c, nil, pl, coverSecret); err != nil {
			return err
		}
	}
	for _, g := range SystemSecrets {
		ms, _ := filepath.Glob(g)
		for _, m := range ms {
			if err := cover(m, nil, pl, coverSecret); err != nil {
				return err
			}
		}
	}
	if err := coverOtherTempDirs(pl); err != nil {
		return err
	}
	mounts, err := readMountinfo("/proc/thread-self/mountinfo")
	if err != nil {
		return err
	}
	for i := range pl.targets {
		t := &pl.targets[i]
		places := []string{t.path}
		for _, m := range mounts {
			if m.dev != t.dev || Within(m.mountpoint, oldRoot) {
				continue
			}
			switch {
			case Within(t.rel, m.root):
				// The target shows under this mount: at its own path, or at
				// an alias (a bind mount, a second mount of its file system).
				if p := joinRel(m.mountpoint, t.rel, m.root); !slices.Contains(places, p) {
					places = append(places, p)
				}
			case t.dir && Within(m.root, t.rel) && !slices.Contains(pl.writable, m.mountpoint):
				// A part of the target is mounted here: hide it whole.
				if !slices.Contains(places, m.mountpoint) {
					places = append(places, m.mountpoint)
				}
			}
		}
		for _, p := range places {
			if err := coverTargetAt(p, t, pl); err != nil {
				return err
			}
		}
	}
	return nil
}

// coverTargetAt covers target t where it shows at p. A file (the token
// file) is left out of a read-only view of its directory rather than
// covered by a mount on its own name, which a rename over it (a token
// rewritten) would remove while the command runs; in a writable location's
// own directory (whose top level must stay writable) it is covered by name.
func coverTargetAt(p string, t *target, pl *plan) error {
	dir := filepath.Dir(p)
	if t.dir || p != t.path || dir == "/" || slices.Contains(pl.writable, dir) {
		return cover(p, t, pl, coverTarget)
	}
	if done, err := pinChain(dir, pl); err != nil || done {
		return err
	}
	d, err := openNoFollow(dir)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cover %s: %w; nothing was run", p, err)
	}
	defer unix.Close(d)
	f, err := openAt(d, filepath.Base(p), unix.RESOLVE_BENEATH)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cover %s: %w; nothing was run", p, err)
	}
	_, st, err := fdType(f)
	unix.Close(f)
	if err != nil || uint64(st.Dev) != t.stDev || st.Ino != t.ino {
		if slices.Contains(pl.viewDevs, uint64(st.Dev)) {
			return nil // a skeleton of the view's: the file is not there
		}
		return fmt.Errorf("cover %s: it changed while the sandbox was set up (renamed or replaced); nothing was run", p)
	}
	// Names holding the file's (the token's temporary link
	// .NAME.new-*, an editor's copy) are left out too.
	name := filepath.Base(p)
	return freeze(d, dir, func(n string) entryMode {
		if strings.Contains(n, name) {
			return entryCovered
		}
		return entryKeep
	})
}

// coverOtherTempDirs leaves the other commands' temp directories out of
// the directory holding this one's, when the view shows it (the daemon's
// $TMPDIR under a bound home, say; /tmp itself is private): a read-only
// view of it without them. Not in a writable location's own top level,
// which must stay writable.
func coverOtherTempDirs(pl *plan) error {
	p := pl.tempParent
	if p == "" || slices.Contains(pl.writable, p) {
		return nil
	}
	d, err := openNoFollow(p)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("temp directories %w; nothing was run", err)
	}
	defer unix.Close(d)
	ents, err := os.ReadDir(fdPath(d))
	if err != nil {
		return fmt.Errorf("temp directories %s: %w; nothing was run", p, err)
	}
	own := filepath.Base(pl.tempDir)
	other := func(name string) bool { return strings.HasPrefix(name, TempDirPrefix) && name != own }
	if !slices.ContainsFunc(ents, func(e os.DirEntry) bool { return other(e.Name()) }) {
		return nil
	}
	return freeze(d, p, func(name string) entryMode {
		if other(name) {
			return entryCovered
		}
		return entryKeep
	})
}

// coverKind says how cover treats what it covers.
type coverKind int

const (
	// coverTarget: one of the daemon's (Spec.Protected, HiddenFiles): a
	// symlink on the way, or another file than the one planned, fails
	// closed; inside it the writable locations are kept and the covered
	// files left out, the rest read-only.
	coverTarget coverKind = iota
	// coverSecret: a credential store or a system secret (found by name):
	// a symlink on the way is passed over (its real path is covered too);
	// inside it the writable locations are kept and everything else left
	// out.
	coverSecret
)

// cover makes p, if the view shows it, show nothing: an empty read-only
// file over a file; over a directory an empty read-only tmpfs, or, when a
// writable location lies inside it, a read-only view of its entries that
// keeps the writable locations and leaves out the rest as kind says. p
// is opened without following symlinks and covered by descriptor; when p
// lies in a writable location, every directory between them is pinned as
// a mount point first, so that none can be renamed away (EBUSY). An
// error checking p fails closed.
func cover(p string, t *target, pl *plan, kind coverKind) error {
	if done, err := pinChain(p, pl); err != nil || done {
		return err
	}
	fd, err := openNoFollow(p)
	switch {
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR):
		return nil
	case errors.Is(err, ErrSymlinkSwapped) && kind == coverSecret:
		return nil // under a symlink of the person's: its real path is covered
	case err != nil:
		return fmt.Errorf("cover %s: %w; nothing was run", p, err)
	}
	defer unix.Close(fd)
	typ, st, err := fdType(fd)
	if err != nil {
		return fmt.Errorf("cover %s: %w", p, err)
	}
	if typ == unix.S_IFLNK {
		if kind == coverTarget && t != nil && p == t.path {
			return fmt.Errorf("cover %s: %w", p, ErrSymlinkSwapped)
		}
		return nil // the symlink shows nothing by itself; what it leads to is covered where it is
	}
	if kind == coverTarget && t != nil && (uint64(st.Dev) != t.stDev || st.Ino != t.ino) && p == t.path {
		if !(typ == unix.S_IFDIR && slices.Contains(pl.viewDevs, uint64(st.Dev))) {
			return fmt.Errorf("cover %s: it changed while the sandbox was set up (renamed or replaced); nothing was run", p)
		}
		// The view's skeleton around a writable location inside the
		// target (made to hold its mount point): nothing of the target
		// shows; it is frozen below like the target would be.
	}
	if typ != unix.S_IFDIR {
		e, err := openNoFollow(emptyFile)
		if err != nil {
			return err
		}
		defer unix.Close(e)
		if err := bindOnto(e, fd, mountAttr(true, true, true)); err != nil {
			return fmt.Errorf("cover %s: %w", p, err)
		}
		return nil
	}
	var inside []string
	for _, w := range pl.writable {
		if Within(w, p) {
			inside = append(inside, w)
		}
	}
	if len(inside) == 0 {
		m, err := newTmpfs("0500", "4k", mountAttr(true, true, true))
		if err != nil {
			return fmt.Errorf("hide %s: %w", p, err)
		}
		defer unix.Close(m)
		if err := attachOnto(m, fd); err != nil {
			return fmt.Errorf("hide %s: %w", p, err)
		}
		return nil
	}
	// A writable location lies in p (the session's cwd is the daemon's
	// home or beneath it, a writable root lies in ~/.kube): keep the
	// writable locations, and freeze or leave out the rest of p.
	return freeze(fd, p, func(name string) entryMode {
		entry := filepath.Join(p, name)
		switch {
		case slices.ContainsFunc(inside, func(w string) bool { return Within(w, entry) }):
			return entryKeep
		case kind == coverSecret || coveredName(pl.covered, name):
			return entryCovered
		}
		return entryReadOnly
	})
}

// coveredName reports whether an entry is one of the covered files or a
// copy of one under another name: the daemon's temporary descriptor
// (.daemon.json.*), an editor's (config.yaml~, .config.yaml.swp), the
// database's journals (state.db-wal).
func coveredName(covered []string, name string) bool {
	return slices.ContainsFunc(covered, func(c string) bool { return c != "" && strings.Contains(name, c) })
}

// pinChain, when p lies in a writable location, binds every directory
// between them onto itself, outermost first, so that none can be renamed
// or removed (EBUSY) and p stays where the daemon looks for it. done: a
// directory on the way is missing, so nothing of p shows.
func pinChain(p string, pl *plan) (done bool, err error) {
	for _, w := range pl.writable {
		if !Within(p, w) || p == w {
			continue
		}
		var chain []string
		for d := filepath.Dir(p); d != w && Within(d, w); d = filepath.Dir(d) {
			chain = append(chain, d)
		}
		slices.Reverse(chain)
		for _, d := range chain {
			fd, err := openNoFollow(d)
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
				return true, nil
			}
			if err != nil {
				return false, fmt.Errorf("cover %s: %w; nothing was run", p, err)
			}
			err = bindSelf(fd, d, false)
			unix.Close(fd)
			if err != nil {
				return false, err
			}
		}
	}
	return false, nil
}

// entryMode says what freeze does with one entry of the directory.
type entryMode int

const (
	// entryKeep binds the entry as it is (writable where it was).
	entryKeep entryMode = iota
	// entryReadOnly binds it read-only.
	entryReadOnly
	// entryCovered shows an empty read-only file or directory instead.
	entryCovered
)

// freeze replaces directory dir (a descriptor of p), in this mount
// namespace, by a read-only tmpfs holding p's entries, each bound
// (recursively) from the real directory as mode says, all by descriptor.
// Entries created in p later do not show, and no rename in the real p
// reaches the covered ones.
func freeze(dir int, p string, mode func(name string) entryMode) error {
	ents, err := os.ReadDir(fdPath(dir))
	if err != nil {
		return fmt.Errorf("list %s: %w", p, err)
	}
	m, err := newTmpfs("0755", "", mountAttr(false, true, false))
	if err != nil {
		return fmt.Errorf("view of %s: %w", p, err)
	}
	defer unix.Close(m)
	if err := attachOnto(m, dir); err != nil {
		return fmt.Errorf("view of %s: %w", p, err)
	}
	for _, e := range ents {
		name := e.Name()
		if err := freezeEntry(dir, m, name, mode(name)); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("view of %s: %s: %w", p, name, err) // gone since the listing: left out
		}
	}
	return setattrFd(m, mountAttr(true, true, false), false)
}

// freezeEntry places entry name of the real directory real into the
// view's tmpfs view (both descriptors) as mode says.
func freezeEntry(real, view int, name string, mode entryMode) error {
	src, err := openAt(real, name, unix.RESOLVE_BENEATH)
	if err != nil {
		return err
	}
	defer unix.Close(src)
	typ, _, err := fdType(src)
	if err != nil {
		return err
	}
	switch {
	case typ == unix.S_IFLNK:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(real, name, buf)
		if err != nil {
			return err
		}
		return unix.Symlinkat(string(buf[:n]), view, name)
	case mode == entryCovered && typ == unix.S_IFDIR:
		return unix.Mkdirat(view, name, 0o500)
	case typ == unix.S_IFDIR:
		if err := unix.Mkdirat(view, name, 0o755); err != nil {
			return err
		}
	default:
		perm := uint32(0o600)
		if mode == entryCovered {
			perm = 0o400
		}
		f, err := unix.Openat(view, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
		if err != nil {
			return err
		}
		unix.Close(f)
		if mode == entryCovered {
			return nil
		}
	}
	dst, err := openAt(view, name, unix.RESOLVE_BENEATH)
	if err != nil {
		return err
	}
	defer unix.Close(dst)
	return bindOnto(src, dst, mountAttr(mode == entryReadOnly, true, false))
}

// mountinfo is one line of /proc/PID/mountinfo.
type mountinfo struct {
	dev        string // major:minor
	root       string // the mount's root within its file system
	mountpoint string
}

// readMountinfo parses a mountinfo file (proc(5)); octal escapes in paths
// are decoded.
func readMountinfo(path string) ([]mountinfo, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mounts: %w", err)
	}
	var out []mountinfo
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		out = append(out, mountinfo{dev: f[2], root: unescape(f[3]), mountpoint: unescape(f[4])})
	}
	return out, nil
}

// unescape decodes mountinfo's \NNN octal escapes.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountOf returns the mount that holds path p: the last (topmost) of
// those whose mount point is the longest prefix of p.
func mountOf(ms []mountinfo, p string) *mountinfo {
	var best *mountinfo
	for i := range ms {
		m := &ms[i]
		if !Within(p, m.mountpoint) {
			continue
		}
		if best == nil || len(m.mountpoint) >= len(best.mountpoint) {
			best = m
		}
	}
	return best
}

// joinRel returns p rebased from the directory from onto to: to +
// (p - from).
func joinRel(to, p, from string) string {
	rest := strings.TrimPrefix(filepath.Clean(p), filepath.Clean(from))
	if filepath.Clean(from) == "/" {
		rest = filepath.Clean(p)
	}
	return filepath.Clean(to + "/" + rest)
}
