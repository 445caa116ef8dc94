package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestDiskFullHint: a home on a full file system gets a hint naming it and
// the bytes left; a roomy one gets none. Needs a tmpfs mount (root).
func TestDiskFullHint(t *testing.T) {
	if h := diskFullHint(t.TempDir()); h != "" {
		t.Fatalf("hint on a roomy file system: %q", h)
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256k"); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v); needs root", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	f, err := os.Create(filepath.Join(dir, "ballast"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	f.Close()
	if h := diskFullHint(dir); !strings.Contains(h, dir) || !strings.Contains(h, "bytes free") {
		t.Fatalf("hint on a full file system: %q", h)
	}
}
