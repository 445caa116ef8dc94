package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Mode says what a sandboxed command may write.
type Mode string

const (
	// ModeWorkspaceWrite allows writes under the session's cwd, the
	// writable roots and the command's private temp directory only.
	ModeWorkspaceWrite Mode = "workspace-write"
	// ModeReadOnly allows writes to the command's private temp directory
	// only.
	ModeReadOnly Mode = "read-only"
	// ModeOff runs commands without any sandbox.
	ModeOff Mode = "off"
)

// rank orders modes from the most confined (0) to none.
func (m Mode) rank() int {
	switch m {
	case ModeReadOnly:
		return 0
	case ModeWorkspaceWrite:
		return 1
	default:
		return 2
	}
}

// Policy is the sandbox configuration of the daemon (config.yaml sandbox)
// and, frozen at creation, of each session.
type Policy struct {
	// Mode is workspace-write (default), read-only or off.
	Mode Mode `json:"mode" yaml:"mode"`
	// Network allows TCP/UDP/raw sockets when true; default false (only
	// Unix sockets).
	Network bool `json:"network" yaml:"network"`
	// WritableRoots are absolute directories writable in workspace-write
	// mode besides the session's cwd: real paths (RealPath) once the
	// config is loaded or the session created.
	WritableRoots []string `json:"writable_roots" yaml:"writable_roots"`
	// ReadableRoots are absolute paths (directories or files) a command
	// may read besides the system trees, the user's home, its $PATH and
	// its writable locations; naming a credential store of the home
	// (CredentialStores, e.g. /home/me/.ssh) or a directory containing it
	// brings it into the view. Real paths once the config is loaded; a
	// session keeps the configured ones.
	ReadableRoots []string `json:"readable_roots,omitempty" yaml:"readable_roots"`
}

// DefaultPolicy is workspace-write without network or extra roots.
func DefaultPolicy() Policy {
	return Policy{Mode: ModeWorkspaceWrite, WritableRoots: []string{}}
}

// Validate checks the mode and that every writable root is an absolute
// path; errors name the field (mode, writable_roots[i]).
func (p Policy) Validate() error {
	switch p.Mode {
	case ModeWorkspaceWrite, ModeReadOnly, ModeOff:
	default:
		return fmt.Errorf("mode: must be workspace-write, read-only or off, got %q", p.Mode)
	}
	for i, r := range p.WritableRoots {
		if !filepath.IsAbs(r) {
			return fmt.Errorf("writable_roots[%d]: must be an absolute path, got %q", i, r)
		}
	}
	for i, r := range p.ReadableRoots {
		if !filepath.IsAbs(r) {
			return fmt.Errorf("readable_roots[%d]: must be an absolute path, got %q", i, r)
		}
	}
	return nil
}

// ErrWiden is wrapped by Narrow's error when the request allows more than
// the base policy.
var ErrWiden = errors.New("a session may narrow the configured sandbox, never widen it")

// Narrow returns req checked against p (the configured policy): req may
// choose a more confined mode, turn the network off, and keep a subset of
// p's writable roots (or roots inside them), compared and returned as real
// paths (RealPath: a symlink in a root is resolved, so it cannot lead
// outside the configured roots); anything wider is an error
// wrapping ErrWiden that names the field. Empty fields of req inherit
// p's: an empty Mode keeps p.Mode, a nil WritableRoots keeps p's roots,
// and a nil network keeps p.Network.
func (p Policy) Narrow(mode Mode, network *bool, roots []string) (Policy, error) {
	out := Policy{Mode: p.Mode, Network: p.Network, WritableRoots: slices.Clone(p.WritableRoots), ReadableRoots: slices.Clone(p.ReadableRoots)}
	if mode != "" {
		switch mode {
		case ModeWorkspaceWrite, ModeReadOnly, ModeOff:
		default:
			return p, fmt.Errorf("sandbox.mode: must be workspace-write, read-only or off, got %q", mode)
		}
		if mode.rank() > p.Mode.rank() {
			return p, fmt.Errorf("sandbox.mode: %q is wider than the configured %q: %w", mode, p.Mode, ErrWiden)
		}
		out.Mode = mode
	}
	if network != nil {
		if *network && !p.Network {
			return p, fmt.Errorf("sandbox.network: the configuration has the network off: %w", ErrWiden)
		}
		out.Network = *network
	}
	if roots != nil {
		out.WritableRoots = []string{}
		for i, r := range roots {
			if !filepath.IsAbs(r) {
				return p, fmt.Errorf("sandbox.writable_roots[%d]: must be an absolute path, got %q", i, r)
			}
			r = RealPath(r)
			if p.Mode == ModeOff || slices.ContainsFunc(p.WritableRoots, func(base string) bool { return Within(r, RealPath(base)) }) {
				out.WritableRoots = append(out.WritableRoots, r)
				continue
			}
			return p, fmt.Errorf("sandbox.writable_roots[%d]: %q is not inside a configured writable root: %w", i, r, ErrWiden)
		}
	}
	if out.Mode == ModeOff {
		out.Network = true // nothing is confined
	}
	return out, nil
}

// String is a one-line description, e.g. "workspace-write, network off,
// writable roots: /a, /b".
func (p Policy) String() string {
	if p.Mode == ModeOff {
		return "off (commands run unsandboxed)"
	}
	s := string(p.Mode)
	if p.Network {
		s += ", network on"
	} else {
		s += ", network off"
	}
	if len(p.WritableRoots) > 0 {
		s += ", writable roots: " + strings.Join(p.WritableRoots, ", ")
	}
	return s
}

// RealPath returns p (absolute) cleaned and with every symlink resolved
// (filepath.EvalSymlinks): when p does not exist, those of its deepest
// existing ancestor, with the missing rest appended (so /ws/link/new, link
// pointing to /elsewhere, is /elsewhere/new, not a path inside /ws); a
// dangling symlink on the way is followed to its target. The sandbox
// stores real paths for the cwd and the writable roots, and its helper
// refuses a command when a symlink stands in one of them later (see
// ErrSymlinkSwapped).
func RealPath(p string) string { return realPath(filepath.Clean(p), 0) }

func realPath(p string, links int) string {
	for dir, rest := p, ""; ; dir, rest = filepath.Dir(dir), filepath.Join(filepath.Base(dir), rest) {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(r, rest)
		}
		if fi, err := os.Lstat(dir); err == nil && fi.Mode()&os.ModeSymlink != 0 && links < 40 {
			if t, err := os.Readlink(dir); err == nil { // dangling: its target does not exist
				if !filepath.IsAbs(t) {
					t = filepath.Join(filepath.Dir(dir), t)
				}
				return realPath(filepath.Join(t, rest), links+1)
			}
		}
		if dir == filepath.Dir(dir) { // the root, or a relative path's "."
			return p
		}
	}
}

// Within reports whether path is dir or lies beneath it (both cleaned,
// absolute; no symlinks resolved).
func Within(path, dir string) bool {
	path, dir = filepath.Clean(path), filepath.Clean(dir)
	if path == dir || dir == "/" {
		return true
	}
	return strings.HasPrefix(path, dir+"/")
}

// Spec is everything the helper needs to confine one command.
type Spec struct {
	// Policy is the session's frozen policy; Mode must not be off.
	Policy Policy `json:"policy"`
	// Cwd is the command's working directory (absolute).
	Cwd string `json:"cwd"`
	// TempDir is the command's private, writable temp directory (TMPDIR).
	TempDir string `json:"temp_dir"`
	// Home is the user's home directory (the daemon's $HOME), in the view
	// read-only without its CredentialStores; empty: not in the view.
	Home string `json:"home,omitempty"`
	// Protected are directories no command may see or change (the
	// daemon's home, every registered home, the registry, the store's
	// socket directories): wherever the view shows one (at its path or
	// through another mount of its file system) it is an empty read-only
	// tmpfs, or, when a writable location lies inside, a read-only view
	// of its entries with CoveredFiles left out.
	Protected []string `json:"protected,omitempty"`
	// HiddenFiles are absolute files no command may read (auth.token_file):
	// an empty read-only file wherever the view shows them.
	HiddenFiles []string `json:"hidden_files,omitempty"`
	// CoveredFiles are base names of files, in each protected directory,
	// that no command may read (the database, the descriptor with the
	// token, the config).
	CoveredFiles []string `json:"covered_files,omitempty"`
	// Gate makes the helper wait for one line on fd 3 before it confines
	// and runs anything; EOF instead exits 125.
	Gate bool `json:"gate,omitempty"`
}

// writable returns the directories the command may write to.
func (s Spec) writable() []string {
	w := []string{}
	if s.TempDir != "" {
		w = append(w, s.TempDir)
	}
	if s.Policy.Mode == ModeWorkspaceWrite {
		if s.Cwd != "" {
			w = append(w, s.Cwd)
		}
		w = append(w, s.Policy.WritableRoots...)
	}
	return w
}

// TempDirPrefix begins the name of every command's private temp
// directory (made by the caller in the daemon's temp directory): on Linux
// the view leaves out the others' (coverOtherTempDirs).
const TempDirPrefix = "sessiond-cmd-"
