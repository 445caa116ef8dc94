//go:build !linux

package tools

import "errors"

// Identify is only implemented on Linux (it reads /proc).
func Identify(pid int) (ProcessIdentity, error) { return ProcessIdentity{}, errors.ErrUnsupported }

// KillGroupIfSame is only implemented on Linux; elsewhere it kills nothing.
func KillGroupIfSame(id ProcessIdentity) (bool, error) { return false, errors.ErrUnsupported }
