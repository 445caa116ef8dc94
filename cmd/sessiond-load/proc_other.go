//go:build !linux

package main

import (
	"errors"
	"os/exec"
)

var errNoProc = errors.New("memory figures need Linux /proc")

func setProcAttrs(cmd *exec.Cmd) {}

func raiseNoFile() (soft, hard uint64, err error) { return 0, 0, errors.New("not raised on this OS") }

func readMem(pid int) (Mem, error) { return Mem{}, errNoProc }

func cpuTime(pid int) (float64, error) { return 0, errNoProc }

func loadAvg() [3]float64 { return [3]float64{} }
