package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, progName(os.Args[0]), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the process exit code; prog
// names the program in printed hints (progName).
func run(ctx context.Context, prog string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	app := newApp(stdin, stdout, stderr)
	app.prog = prog
	root := app.rootCommand()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return app.exitCode(err)
}
