package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// AuthConfig is the config.yaml key auth: how the daemon's own token (the
// one in daemon.json) is chosen.
type AuthConfig struct {
	// TokenFile, when set, is a file holding the token, so that every
	// daemon sharing a store (issue 17: several daemons behind one load
	// balancer) accepts the same token. A relative path is relative to the
	// home directory. The file must be a regular file that neither group nor
	// others may access (mode 0600 or 0400); it holds one token of 32 to
	// 4096 characters from the HTTP token alphabet (letters, digits and
	// !#$%&'*+-.^_`|~), surrounding white space ignored. A missing file is
	// created (mode 0600, 64 hex characters from crypto/rand, O_EXCL so
	// that daemons starting together on shared storage agree). Empty (the
	// default): a fresh random token at every start.
	TokenFile string `yaml:"token_file"`
}

// Token bounds, in bytes.
const (
	minTokenLen = 32
	maxTokenLen = 4096
)

// newRandomToken returns 64 hex characters (32 bytes from crypto/rand).
func newRandomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// tokenPath resolves auth.token_file against home ("" when unset).
func (c AuthConfig) tokenPath(home string) string {
	if c.TokenFile == "" || filepath.IsAbs(c.TokenFile) {
		return c.TokenFile
	}
	return filepath.Join(home, c.TokenFile)
}

// LoadToken returns the daemon token: a fresh random one when path is
// empty, else the token held by the file at path, which is created (0600,
// a random token) when missing; created reports that. Errors name the path
// and say what to do: the file is not a regular file, is accessible by
// group or others, is empty, too short or too long, or holds a character a
// token may not carry (the error gives its position, never the token).
func LoadToken(path string) (token string, created bool, err error) {
	if path == "" {
		token, err = newRandomToken()
		return token, false, err
	}
	// A symbolic link (a mounted secret) is followed; what is checked is
	// the file opened, so it cannot change between the check and the read.
	// O_NONBLOCK: a FIFO is refused below instead of blocking the start.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		if token, err = createTokenFile(path); err == nil {
			return token, true, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", false, err
		}
		// Another daemon created it first: read its token.
		f, err = os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	}
	if err != nil {
		return "", false, fmt.Errorf("auth.token_file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", false, fmt.Errorf("auth.token_file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return "", false, fmt.Errorf("auth.token_file %s: not a regular file (%s)", path, st.Mode().Type())
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return "", false, fmt.Errorf("auth.token_file %s: mode %04o lets group or others access the token; run chmod 600 %s",
			path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenLen+1024))
	if err != nil {
		return "", false, fmt.Errorf("auth.token_file %s: %w", path, err)
	}
	token = strings.TrimSpace(string(b))
	if err := checkToken(token); err != nil {
		return "", false, fmt.Errorf("auth.token_file %s: %w", path, err)
	}
	return token, false, nil
}

// checkToken validates a token read from a file.
func checkToken(token string) error {
	switch {
	case token == "":
		return errors.New("the file is empty; put a token in it (e.g. openssl rand -hex 32) or remove it to have one created")
	case len(token) < minTokenLen:
		return fmt.Errorf("the token has %d characters, at least %d are needed (e.g. openssl rand -hex 32)", len(token), minTokenLen)
	case len(token) > maxTokenLen:
		return fmt.Errorf("the token is longer than %d characters", maxTokenLen)
	}
	for i := 0; i < len(token); i++ {
		if !isTokenChar(token[i]) {
			return fmt.Errorf("character %d of the token is not allowed (a token is letters, digits and !#$%%&'*+-.^_`|~, on one line)", i+1)
		}
	}
	return nil
}

// isTokenChar reports whether c is an RFC 9110 tchar: a token travels in
// an Authorization header and in the sessiond.token.<t> subprotocol.
func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// createTokenFile writes a fresh token to a temporary file beside path
// (mode 0600, synced) and links it to path, so that the file appears with
// its content or not at all; it returns an error wrapping os.ErrExist when
// another process created path first.
func createTokenFile(path string) (string, error) {
	token, err := newRandomToken()
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".new-*")
	if err != nil {
		return "", fmt.Errorf("auth.token_file: creating %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	werr := f.Chmod(0o600)
	if werr == nil {
		_, werr = f.WriteString(token + "\n")
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return "", fmt.Errorf("auth.token_file: writing %s: %w", path, werr)
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return "", err
		}
		return "", fmt.Errorf("auth.token_file: creating %s: %w", path, err)
	}
	return token, nil
}
