package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The registry of daemon homes: every daemon of this user records its
// home (RegisterHome) in a per-uid directory outside any workspace, and
// every sandboxed command hides every registered home that exists
// (RegisteredHomes), not only its own daemon's: a command must not write
// another daemon's state.db (its allowlist) even when that home lies in
// its writable cwd. Entries persist after the daemon stops (its home
// still holds a database); entries whose home is gone are pruned.
//
// The candidates, most preferred first: /run/sessiond-UID/homes,
// $XDG_RUNTIME_DIR/sessiond/homes, and, not for root, $TMPDIR/sessiond-UID/homes.
// A daemon registers in the first that can be made; commands read every
// one that exists (daemons of one user may differ in their environment).
// The registry fails closed: a candidate that exists but is not a real
// directory owned by this uid and closed to others (mode 0700), or that
// cannot be read, is an error, and no sandboxed command runs (a command
// that could switch the registry off would uncover every other home).
// /run and $XDG_RUNTIME_DIR are emptied at boot: a home is protected from
// other daemons' commands once its own daemon has run since boot.

// registryBases are the candidate directories (without "homes").
var registryBases = func() []string {
	uid := os.Getuid()
	cands := []string{filepath.Join("/run", "sessiond-"+strconv.Itoa(uid))}
	if x := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(x) {
		cands = append(cands, filepath.Join(x, "sessiond"))
	}
	if uid != 0 { // root always has /run; a /tmp name could be squatted by anyone
		cands = append(cands, filepath.Join(os.TempDir(), "sessiond-"+strconv.Itoa(uid)))
	}
	return cands
}

// ErrRegistryUnsafe is wrapped by the registry's errors when a candidate
// directory exists but cannot be trusted or read.
var ErrRegistryUnsafe = errors.New("the registry of daemon homes cannot be trusted; no sandboxed command runs until it is fixed")

// RegistryDir returns the directory this daemon registers its home in:
// the first candidate that is or can be made safely. An existing unsafe
// candidate is an error wrapping ErrRegistryUnsafe; the error says why
// none can be used.
func RegistryDir() (string, error) {
	uid := os.Getuid()
	var errs []error
	for _, c := range registryBases() {
		dir := filepath.Join(c, "homes")
		made, err := makeSafeDir(c, uid)
		if err == nil {
			made, err = makeSafeDir(dir, uid)
		}
		switch {
		case err != nil:
			return "", err
		case !made:
			errs = append(errs, fmt.Errorf("%s cannot be made", dir))
			continue
		}
		return dir, nil
	}
	return "", fmt.Errorf("sandbox: no registry directory for daemon homes: %w", errors.Join(errs...))
}

// makeSafeDir makes dir (mode 0700) when missing and checks it (safeDir).
// made is false, with no error, when dir does not exist and cannot be
// made here (its parent is missing or not writable by this user).
func makeSafeDir(dir string, uid int) (made bool, err error) {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		if _, lerr := os.Lstat(dir); errors.Is(lerr, os.ErrNotExist) {
			return false, nil
		}
	}
	if err := safeDir(dir, uid); err != nil {
		return false, fmt.Errorf("sandbox: %w: %w", ErrRegistryUnsafe, err)
	}
	return true, nil
}

// safeDir checks that dir is a directory, not a symlink, owned by uid,
// closed to others and readable by its owner.
func safeDir(dir string, uid int) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s: not a directory", dir)
	case !ok || int(st.Uid) != uid:
		return fmt.Errorf("%s: not owned by uid %d", dir, uid)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%s: open to others (mode %o)", dir, fi.Mode().Perm())
	case uid != 0 && fi.Mode().Perm()&0o700 != 0o700:
		return fmt.Errorf("%s: mode %o (0700 needed)", dir, fi.Mode().Perm())
	}
	return nil
}

// RegisterHome records home (made absolute and real) in the registry.
func RegisterHome(home string) error {
	dir, err := RegistryDir()
	if err != nil {
		return err
	}
	a, err := filepath.Abs(home)
	if err != nil {
		return fmt.Errorf("sandbox: register home: %w", err)
	}
	a = RealPath(a)
	sum := sha256.Sum256([]byte(a))
	name := hex.EncodeToString(sum[:16])
	tmp, err := os.CreateTemp(dir, ".tmp-")
	if err != nil {
		return fmt.Errorf("sandbox: register home: %w", err)
	}
	_, werr := tmp.WriteString(a + "\n")
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("sandbox: register home: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("sandbox: register home: %w", err)
	}
	return nil
}

// RegisteredHomes returns the homes registered in every candidate
// directory that exists (real paths of the homes that exist) and those
// directories themselves, which commands must not change either. Entries
// whose home is gone are removed. An existing candidate that is unsafe
// or unreadable, or no registry at all, is an error (wrapping
// ErrRegistryUnsafe for the former): the caller must then run nothing.
func RegisteredHomes() ([]string, error) {
	uid := os.Getuid()
	var homes []string
	for _, c := range registryBases() {
		dir := filepath.Join(c, "homes")
		if _, err := os.Lstat(c); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := safeDir(c, uid); err != nil {
			return nil, fmt.Errorf("sandbox: %w: %w", ErrRegistryUnsafe, err)
		}
		if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
			homes = append(homes, c)
			continue
		}
		if err := safeDir(dir, uid); err != nil {
			return nil, fmt.Errorf("sandbox: %w: %w", ErrRegistryUnsafe, err)
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("sandbox: %w: read %s: %w", ErrRegistryUnsafe, dir, err)
		}
		homes = append(homes, c, dir)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			h, err := registeredHome(dir, e.Name())
			if err != nil {
				return nil, err
			}
			if h != "" {
				homes = append(homes, h)
			}
		}
	}
	if len(homes) == 0 {
		return nil, errors.New("sandbox: no registry of daemon homes exists (a daemon makes it when it starts); no sandboxed command runs without it")
	}
	return homes, nil
}

// registeredHome reads the registry entry name of dir: the home it names
// (its real path; as written when it cannot be checked now, so that a view
// fails closed on it), or "" when there is none to protect: the entry is
// gone since dir was listed (its daemon unregistered it, or another reader
// pruned it), does not name an absolute path, or names a home that no
// longer exists (the entry is pruned) or is not a directory. An entry that
// cannot be read otherwise is ErrRegistryUnsafe.
func registeredHome(dir, name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("sandbox: %w: read %s: %w", ErrRegistryUnsafe, name, err)
	}
	h := strings.TrimSpace(string(b))
	if !filepath.IsAbs(h) {
		return "", nil
	}
	fi, err := os.Stat(h)
	switch {
	case errors.Is(err, os.ErrNotExist):
		os.Remove(filepath.Join(dir, name))
		return "", nil
	case err != nil:
		// It cannot be checked now (chmod 000 on a parent, say).
		return filepath.Clean(h), nil
	case fi.IsDir():
		return RealPath(h), nil
	}
	return "", nil
}
