package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Mounts by descriptor. Every place the view mounts on may lie in a
// directory that a command of another session can change while this
// helper builds the view (a shared cwd, a home that is another session's
// cwd): a path checked and then mounted on by name could have become a
// symlink in between, and mount(2) follows it (into the old root, say).
// So each target is opened once without following any symlink
// (openat2 RESOLVE_NO_SYMLINKS), and the mount is attached to that very
// descriptor: a clone of the source tree (open_tree), its attributes set
// while detached (mount_setattr), moved onto the target (move_mount).

// openNoFollow opens p (absolute) O_PATH without following a symlink in
// any component; a symlink as the last component is opened as itself.
// A symlink on the way is an error wrapping ErrSymlinkSwapped.
func openNoFollow(p string) (int, error) {
	return openAt(unix.AT_FDCWD, p, 0)
}

// openAt is openNoFollow of name relative to dirfd, which it must not
// leave when beneath is set (RESOLVE_BENEATH).
func openAt(dirfd int, name string, beneath uint64) (int, error) {
	fd, err := unix.Openat2(dirfd, name, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | beneath,
	})
	if errors.Is(err, unix.ELOOP) {
		return -1, fmt.Errorf("%s: %w", name, ErrSymlinkSwapped)
	}
	if err != nil {
		return -1, fmt.Errorf("%s: %w", name, err)
	}
	return fd, nil
}

// fdType is the S_IFMT type of what fd refers to.
func fdType(fd int) (uint32, unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, st, err
	}
	return st.Mode & unix.S_IFMT, st, nil
}

// mountAttr is the mount_setattr attributes of a view mount: read-only
// when ro, nosuid and nodev when safe, noexec when noexec.
func mountAttr(ro, safe, noexec bool) uint64 {
	var a uint64
	if ro {
		a |= unix.MOUNT_ATTR_RDONLY
	}
	if safe {
		a |= unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	}
	if noexec {
		a |= unix.MOUNT_ATTR_NOEXEC
	}
	return a
}

// bindOnto attaches a recursive clone of the mount tree at src onto
// target (both descriptors), with attr set on every mount of the clone.
func bindOnto(src, target int, attr uint64) error {
	tree, err := unix.OpenTree(src, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("clone mount: %w", err)
	}
	defer unix.Close(tree)
	if attr != 0 {
		if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: attr}); err != nil {
			return fmt.Errorf("mount attributes: %w", err)
		}
	}
	if err := unix.MoveMount(tree, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach mount: %w", err)
	}
	return nil
}

// newTmpfs makes a detached tmpfs (fsopen, fsmount) with the given mode
// and size (empty: the default) and mount attributes; the caller attaches
// it (attachOnto) and closes it.
func newTmpfs(mode, size string, attr uint64) (int, error) {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("tmpfs: %w", err)
	}
	defer unix.Close(fs)
	if err := unix.FsconfigSetString(fs, "mode", mode); err != nil {
		return -1, fmt.Errorf("tmpfs mode: %w", err)
	}
	if size != "" {
		if err := unix.FsconfigSetString(fs, "size", size); err != nil {
			return -1, fmt.Errorf("tmpfs size: %w", err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, fmt.Errorf("tmpfs: %w", err)
	}
	m, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, int(attr))
	if err != nil {
		return -1, fmt.Errorf("tmpfs mount: %w", err)
	}
	return m, nil
}

// attachOnto moves the detached mount m onto target; m then refers to
// the attached mount's root.
func attachOnto(m, target int) error {
	if err := unix.MoveMount(m, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach mount: %w", err)
	}
	return nil
}

// setattrFd sets attr on the mount fd refers to (its root), recursive or
// not.
func setattrFd(fd int, attr uint64, recursive bool) error {
	flags := uint(unix.AT_EMPTY_PATH)
	if recursive {
		flags |= unix.AT_RECURSIVE
	}
	if err := unix.MountSetattr(fd, "", flags, &unix.MountAttr{Attr_set: attr}); err != nil {
		return fmt.Errorf("mount attributes: %w", err)
	}
	return nil
}

// targetFor opens p in the view as a place to mount on, without
// following any symlink, making the missing directories (and, when !dir,
// the last component as an empty file) on the way; only the view's own
// tmpfs takes new entries (a bound tree is read-only, EROFS).
func targetFor(p string, dir bool) (int, error) {
	fd, err := openNoFollow("/")
	if err != nil {
		return -1, err
	}
	parts := strings.Split(strings.Trim(filepath.Clean(p), "/"), "/")
	for i, name := range parts {
		if name == "" {
			continue
		}
		last := i == len(parts)-1
		next, err := openAt(fd, name, unix.RESOLVE_BENEATH)
		if errors.Is(err, unix.ENOENT) {
			switch {
			case !last || dir:
				err = unix.Mkdirat(fd, name, 0o755)
			default:
				var f int
				if f, err = unix.Openat(fd, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o400); err == nil {
					unix.Close(f)
				}
			}
			if err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(fd)
				return -1, fmt.Errorf("view: mount point %s: %w", p, err)
			}
			next, err = openAt(fd, name, unix.RESOLVE_BENEATH)
		}
		unix.Close(fd)
		if err != nil {
			return -1, fmt.Errorf("view: mount point %s: %w", p, err)
		}
		fd = next
	}
	return fd, nil
}
