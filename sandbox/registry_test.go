package sandbox

import (
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
	if err := safeDir(filepath.Join(root, "new"), os.Getuid()); err != nil {
		t.Errorf("a new directory: %v", err)
	}
}
