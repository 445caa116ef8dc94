package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A registered home is listed (as its real path) with the registry
// itself; once the home is gone its entry is pruned.
func TestRegistryOfHomes(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(home, link); err != nil {
		t.Fatal(err)
	}
	if err := RegisterHome(link); err != nil {
		t.Fatal(err)
	}
	homes, err := RegisteredHomes()
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := RegistryDir()
	if !slices.Contains(homes, home) || !slices.Contains(homes, dir) {
		t.Fatalf("registered %v, want %s and the registry %s", homes, home, dir)
	}
	os.Remove(home)
	homes, _ = RegisteredHomes()
	if slices.Contains(homes, home) {
		t.Fatalf("a home that is gone is still listed: %v", homes)
	}
}

// The registry directory is refused when it is a symlink or open to
// others (someone else could add or remove entries).
func TestRegistryDirMustBeSafe(t *testing.T) {
	root := t.TempDir()
	real := filepath.Join(root, "real")
	os.Mkdir(real, 0o700)
	link := filepath.Join(root, "link")
	os.Symlink(real, link)
	if err := safeDir(link, os.Getuid()); err == nil {
		t.Error("a symlink was accepted as the registry directory")
	}
	open := filepath.Join(root, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o777)
	if err := safeDir(open, os.Getuid()); err == nil {
		t.Error("a directory open to others was accepted")
	}
	if err := safeDir(real, os.Getuid()+1); err == nil {
		t.Error("a directory of another uid was accepted")
	}
	if made, err := makeSafeDir(filepath.Join(root, "new"), os.Getuid()); err != nil || !made {
		t.Errorf("a new directory: %v %v", made, err)
	}
}

// withRegistry points the registry's candidates at dirs for one test.
func withRegistry(t *testing.T, dirs ...string) {
	old := registryBases
	registryBases = func() []string { return dirs }
	t.Cleanup(func() { registryBases = old })
}

// The registry fails closed (issue 22, finding 8): a candidate that was
// made by someone else, or made unreadable by chmod 000, is an error for
// RegisteredHomes — the caller runs nothing — never a registry without
// homes. A candidate that cannot be made here (its parent is missing) is
// passed over.
func TestRegistryFailsClosed(t *testing.T) {
	root := t.TempDir()
	first, second := filepath.Join(root, "missing-parent", "r"), filepath.Join(root, "r")
	withRegistry(t, first, second)
	home := t.TempDir()
	if err := RegisterHome(home); err != nil {
		t.Fatal(err)
	}
	if dir, _ := RegistryDir(); dir != filepath.Join(second, "homes") {
		t.Fatalf("registry %s, want the second candidate", dir)
	}
	if homes, err := RegisteredHomes(); err != nil || !slices.Contains(homes, RealPath(home)) {
		t.Fatalf("homes %v, %v", homes, err)
	}
	if err := os.Chmod(second, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := RegisteredHomes(); !errors.Is(err, ErrRegistryUnsafe) {
		t.Errorf("a registry open to others: %v, want ErrRegistryUnsafe", err)
	}
	os.Chmod(second, 0o700)
	if err := os.Chown(second, os.Getuid()+1, -1); err == nil {
		if _, err := RegisteredHomes(); !errors.Is(err, ErrRegistryUnsafe) {
			t.Errorf("a registry of another uid: %v, want ErrRegistryUnsafe", err)
		}
		if _, err := RegistryDir(); !errors.Is(err, ErrRegistryUnsafe) {
			t.Errorf("registering in a registry of another uid: %v, want ErrRegistryUnsafe", err)
		}
		os.Chown(second, os.Getuid(), -1)
	}
	if err := os.Chmod(filepath.Join(second, "homes"), 0o000); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(filepath.Join(second, "homes"), 0o700)
	if os.Getuid() != 0 { // root reads it all the same
		if _, err := RegisteredHomes(); !errors.Is(err, ErrRegistryUnsafe) {
			t.Errorf("a registry made unreadable: %v, want ErrRegistryUnsafe", err)
		}
	}
	withRegistry(t, first)
	if _, err := RegisteredHomes(); err == nil {
		t.Error("no registry at all: no error")
	}
}

// An entry listed and then removed before it is read (its daemon
// unregistered it, or a concurrent RegisteredHomes pruned it because its
// home is gone) protects nothing and is no reason to distrust the
// registry: concurrent commands and MCP servers of one daemon read the
// registry at once, and one failed with "the registry of daemon homes
// cannot be trusted: … no such file or directory" (TestMCPFaults, CI).
// An entry that cannot be read for another reason still fails closed.
func TestRegistryEntryGoneSinceTheListing(t *testing.T) {
	dir := t.TempDir()
	if h, err := registeredHome(dir, "0123456789abcdef"); err != nil || h != "" {
		t.Fatalf("an entry removed since the listing: %q, %v; want nothing and no error", h, err)
	}
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := registeredHome(dir, "adir"); !errors.Is(err, ErrRegistryUnsafe) {
		t.Fatalf("an entry that cannot be read: %v, want ErrRegistryUnsafe", err)
	}
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "e"), []byte(home+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if h, err := registeredHome(dir, "e"); err != nil || h != RealPath(home) {
		t.Fatalf("a registered home: %q, %v; want %s", h, err, RealPath(home))
	}
}
