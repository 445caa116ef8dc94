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
// The directory is the first of these that can be made safely (a real
// directory, not a symlink, owned by this uid, mode 0700):
// /run/sessiond-UID/homes, $XDG_RUNTIME_DIR/sessiond/homes,
// $TMPDIR/sessiond-UID/homes. /run and $XDG_RUNTIME_DIR are emptied at
// boot: a home is protected from other daemons' commands once its own
// daemon has run since boot.

// RegistryDir returns the registry directory, made when missing; the
// error says why none of the candidates can be used.
func RegistryDir() (string, error) {
	uid := os.Getuid()
	var cands []string
	cands = append(cands, filepath.Join("/run", "sessiond-"+strconv.Itoa(uid)))
	if x := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(x) {
		cands = append(cands, filepath.Join(x, "sessiond"))
	}
	cands = append(cands, filepath.Join(os.TempDir(), "sessiond-"+strconv.Itoa(uid)))
	var errs []error
	for _, c := range cands {
		dir := filepath.Join(c, "homes")
		if err := safeDir(c, uid); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := safeDir(dir, uid); err != nil {
			errs = append(errs, err)
			continue
		}
		return dir, nil
	}
	return "", fmt.Errorf("sandbox: no registry directory for daemon homes: %w", errors.Join(errs...))
}

// safeDir makes dir (mode 0700) when missing and checks that it is a
// directory, not a symlink, owned by uid and closed to others.
func safeDir(dir string, uid int) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
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

// RegisteredHomes returns the registered homes that exist (real paths)
// and the registry directory itself, which commands must not change
// either. Entries whose home is gone are removed. Without a registry it
// returns nil and the error.
func RegisteredHomes() ([]string, error) {
	dir, err := RegistryDir()
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox: read registry: %w", err)
	}
	homes := []string{dir}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		h := strings.TrimSpace(string(b))
		if !filepath.IsAbs(h) {
			continue
		}
		if fi, err := os.Stat(h); err != nil || !fi.IsDir() {
			if errors.Is(err, os.ErrNotExist) {
				os.Remove(filepath.Join(dir, e.Name()))
			}
			continue
		}
		homes = append(homes, RealPath(h))
	}
	return homes, nil
}
