package protocol

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// File names inside the home directory (PROTOCOL.md section 1).
const (
	ConfigFile     = "config.yaml"
	StateFile      = "state.db"
	DescriptorFile = "daemon.json"
	LockFile       = "daemon.lock"
)

// Descriptor is HOME/daemon.json, how clients find and authenticate to the
// daemon (PROTOCOL.md section 1).
type Descriptor struct {
	PID       int    `json:"pid"`
	URL       string `json:"url"`   // ws://127.0.0.1:PORT/rpc
	Token     string `json:"token"` // bearer token for the upgrade
	Protocol  int    `json:"protocol"`
	Version   string `json:"version"`
	BootEpoch int64  `json:"boot_epoch"`
	StartedAt string `json:"started_at"` // RFC 3339 UTC
}

// ResolveHome picks the home directory: flag, else $SESSIOND_HOME, else
// $XDG_STATE_HOME/sessiond, else ~/.local/state/sessiond. The result is
// absolute. It fails only when none is set and the user has no home.
func ResolveHome(flag string) (string, error) {
	home := flag
	if home == "" {
		home = os.Getenv("SESSIOND_HOME")
	}
	if home == "" {
		if x := os.Getenv("XDG_STATE_HOME"); x != "" {
			home = filepath.Join(x, "sessiond")
		} else {
			u, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("no --home, SESSIOND_HOME or XDG_STATE_HOME, and no user home: %w", err)
			}
			home = filepath.Join(u, ".local", "state", "sessiond")
		}
	}
	return filepath.Abs(home)
}

// HomeOrigin says where ResolveHome(flag) took the home from, for messages.
func HomeOrigin(flag string) string {
	switch {
	case flag != "":
		return "from --home"
	case os.Getenv("SESSIOND_HOME") != "":
		return "from $SESSIOND_HOME"
	case os.Getenv("XDG_STATE_HOME") != "":
		return "from $XDG_STATE_HOME, as neither --home nor $SESSIOND_HOME is set"
	}
	return "the default, as neither --home nor $SESSIOND_HOME is set"
}

// ReadDescriptor reads HOME/daemon.json; a file that is not JSON is an
// error naming daemon.json.
func ReadDescriptor(home string) (Descriptor, error) {
	var d Descriptor
	b, err := os.ReadFile(filepath.Join(home, DescriptorFile))
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("%s: %w", DescriptorFile, err)
	}
	return d, nil
}
