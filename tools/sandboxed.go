package tools

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/sessiond/sessiond/sandbox"
)

// SandboxEscalated is the terminal tool's sandbox_permissions value asking
// to run a command outside the sandbox, after a person's approval.
const SandboxEscalated = "escalated"

// checkSandboxArgs validates sandbox_permissions and justification.
func checkSandboxArgs(a TerminalArgs) error {
	switch a.SandboxPermissions {
	case "":
		if strings.TrimSpace(a.Justification) != "" {
			return fmt.Errorf("%w: justification is only for sandbox_permissions \"escalated\"", ErrInvalidTerminalArgs)
		}
	case SandboxEscalated:
		if strings.TrimSpace(a.Justification) == "" {
			return fmt.Errorf("%w: sandbox_permissions \"escalated\" needs a justification: say why the command must run outside the sandbox", ErrInvalidTerminalArgs)
		}
	default:
		return fmt.Errorf("%w: sandbox_permissions must be \"escalated\" or absent, got %q", ErrInvalidTerminalArgs, a.SandboxPermissions)
	}
	return nil
}

// sandboxCommand builds the confined command and its private temp
// directory (the caller removes it).
func sandboxCommand(ctx context.Context, command string, opt TerminalOptions, gate bool) (*exec.Cmd, string, error) {
	spec, tmp, err := commandSpec(opt, gate)
	if err != nil {
		return nil, "", err
	}
	cmd, err := spec.Command(ctx, command)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, "", fmt.Errorf("tools: %w", err)
	}
	return cmd, tmp, nil
}

// commandSpec is the Spec of one command: opt.Sandbox with opt.Cwd, a
// private temp directory made now (the caller removes it), gate, and
// every home registered now protected. A pre-started helper gets it at
// its dispatch, a cold one at its start.
func commandSpec(opt TerminalOptions, gate bool) (sandbox.Spec, string, error) {
	tmp, err := os.MkdirTemp("", sandbox.TempDirPrefix)
	if err != nil {
		return sandbox.Spec{}, "", fmt.Errorf("tools: command temp directory: %w", err)
	}
	tmp = sandbox.RealPath(tmp) // the helper follows no symlink in it
	spec := *opt.Sandbox
	spec.Cwd = opt.Cwd
	if spec.Cwd == "" {
		spec.Cwd, _ = os.Getwd()
	}
	spec.TempDir = tmp
	spec.Gate = gate
	// Every registered daemon home (another daemon's, in this cwd, say) is
	// protected like this daemon's own. A registry that cannot be trusted
	// or read runs nothing: it would leave those homes in reach.
	others, err := sandbox.RegisteredHomes()
	if err != nil {
		os.RemoveAll(tmp)
		return sandbox.Spec{}, "", fmt.Errorf("sessiond sandbox: %w; nothing was run", err)
	}
	spec.Protected = slices.Clone(spec.Protected)
	for _, h := range others {
		if !slices.Contains(spec.Protected, h) {
			spec.Protected = append(spec.Protected, h)
		}
	}
	return spec, tmp, nil
}

// blockedPatterns are the messages of the errors a sandbox causes.
var blockedPatterns = regexp.MustCompile(`(?i)permission denied|read-only file system|operation not permitted|` +
	`network is unreachable|connection refused|address family not supported|could not resolve host|` +
	`temporary failure in name resolution|name or service not known|EACCES|EPERM|EROFS|` +
	// What is not in the command's view does not exist for it.
	`directory nonexistent|no such file or directory`)

func sandboxBlocked(output string) bool { return blockedPatterns.MatchString(output) }

// touchesProtected reports whether command names a protected directory
// (the daemon's home), which the sandbox hides or freezes: its failure is
// then the sandbox's doing whatever the message says (an empty database,
// an empty descriptor).
func touchesProtected(command string, spec *sandbox.Spec) bool {
	for _, p := range spec.Protected {
		if p != "" && p != "/" && strings.Contains(command, p) {
			return true
		}
	}
	return false
}

func blockedNote(sb string) string {
	return "The sandbox (" + sb + ") probably blocked this command: it sees only the system directories, " +
		"the user's home (read-only, without credentials), $PATH, the working directory and the writable roots; " +
		"it may write only in the working directory, the writable roots and $TMPDIR, cannot reach the network " +
		"or the user's services, and cannot see or change the daemon's home, its processes or its secrets. If the " +
		"command really needs more, call terminal again with \"sandbox_permissions\": \"escalated\" and a " +
		"\"justification\" saying why; a person will be asked to approve running it outside the sandbox."
}

// baseEnv are the variables every command gets from the daemon's
// environment (LC_* too).
var baseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TERM", "TZ", "TMPDIR"}

// credentialURL matches a URL that carries a password: scheme://user:pass@.
var credentialURL = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://[^/@\s]*:[^/@\s]*@`)

// AllowedEnv returns the entries of environ ("NAME=value") a command may
// see: PATH, HOME, USER, LOGNAME, SHELL, LANG, LC_*, TERM, TZ and TMPDIR,
// less those whose names match an exclude pattern (path.Match glob,
// case-insensitive) or whose value is a URL with a password; plus every
// variable named in passthrough (exact names, or globs), which is passed
// as is. Nothing else of the daemon's environment (OPENAI_API_KEY,
// DATABASE_URL, GITHUB_PAT, …) reaches a command.
func AllowedEnv(environ, passthrough, exclude []string) []string {
	env := []string{}
	for _, kv := range environ {
		name, val, _ := strings.Cut(kv, "=")
		if name == "" || name == MarkerEnv {
			continue
		}
		if matchAny(name, passthrough) {
			env = append(env, kv)
			continue
		}
		base := strings.HasPrefix(name, "LC_")
		for _, b := range baseEnv {
			base = base || name == b
		}
		if base && !envExcluded(name, exclude) && !credentialURL.MatchString(val) {
			env = append(env, kv)
		}
	}
	return env
}

func matchAny(name string, patterns []string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok || p == name {
			return true
		}
	}
	return false
}

// ProtectedFiles are the base names, in the daemon's home, that no
// sandboxed command may read: the database (with its WAL and shared
// memory), the config, the descriptor with the token, and the lock.
var ProtectedFiles = []string{"state.db", "state.db-wal", "state.db-shm", "state.db-journal", "config.yaml", "daemon.json", "daemon.lock"}

// SandboxSpec returns the spec confining commands to p with home (the
// daemon's home), the files in hidden (auth.token_file) and the unix
// sockets in sockets (the store's PostgreSQL server: store.SocketFiles and
// DB.ServerSocketFiles) out of the commands' view: each socket's directory
// is protected like the home and the socket itself covered. The user's
// home (the daemon's $HOME) is in the view read-only, without its
// credential stores. Paths are made absolute and resolved through
// symlinks when they exist.
func SandboxSpec(p sandbox.Policy, home string, hidden []string, sockets ...string) *sandbox.Spec {
	s := &sandbox.Spec{Policy: p, Home: os.Getenv("HOME"), Protected: []string{realPath(home)}, CoveredFiles: slices.Clone(ProtectedFiles)}
	for _, h := range hidden {
		if h != "" {
			s.HiddenFiles = append(s.HiddenFiles, realPath(h))
		}
	}
	for _, sock := range sockets {
		dir, name := filepath.Split(sock)
		if dir = realPath(dir); !slices.Contains(s.Protected, dir) {
			s.Protected = append(s.Protected, dir)
		}
		if !slices.Contains(s.CoveredFiles, name) {
			s.CoveredFiles = append(s.CoveredFiles, name)
		}
	}
	return s
}

func realPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		p = a
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	return p
}
