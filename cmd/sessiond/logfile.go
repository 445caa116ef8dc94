package main

import (
	"fmt"
	"os"
	"sync"
)

// logFile is the --log-file writer: appends to PATH (created 0600) and
// reopens it on Reopen (SIGHUP), so that logrotate can move the file away
// and the daemon goes on in a new one. A write never fails the caller's
// log call for good: when the reopen fails, writes go on to the old file.
type logFile struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

func openLogFile(path string) (*logFile, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--log-file: %w", err)
	}
	return &logFile{path: path, f: f}, nil
}

// Write appends p (one log record) to the current file.
func (l *logFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Write(p)
}

// Reopen opens PATH anew and closes the previous file; on error the
// previous file stays in use.
func (l *logFile) Reopen() error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	l.mu.Lock()
	old := l.f
	l.f = f
	l.mu.Unlock()
	return old.Close()
}

// Close closes the current file.
func (l *logFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}
