// Command sessiond-fakemodel serves a fake OpenAI-compatible Chat
// Completions model on loopback, so that sessiond can be tried without a
// model server: `make fake-model` in one terminal, its config snippet in
// the daemon's config.yaml, `make run` in another.
//
// It answers by a small script on the latest user message (see script.go):
// "run: CMD" calls the terminal tool, "ask: QUESTION | A | B" the clarify
// tool, anything else is echoed. It is the test fake of package
// fixtures/fakemodel, so it imports only the standard library and that
// package, and it refuses to listen on anything but a loopback address.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/fixtures/fakemodel"
)

// defaultListen is the address `make fake-model` serves on.
const defaultListen = "127.0.0.1:8399"

const usage = `sessiond-fakemodel — a fake OpenAI-compatible model for trying sessiond

Usage:
  sessiond-fakemodel [--listen 127.0.0.1:PORT] [--chunk-delay DURATION] [--quiet]

It serves POST /v1/chat/completions (streamed or not) and GET /v1/models on
a loopback address, prints the base URL and the config.yaml snippet for the
daemon, and answers by the latest user message:

` + scriptHelp + `

Ctrl-C stops it. Exit codes: 0 stopped by a signal; 1 cannot listen (address
in use, not a loopback address); 2 bad flags.

Flags:
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run serves until ctx ends and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sessiond-fakemodel", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", defaultListen, "address to serve on; must be loopback (127.0.0.1:PORT, [::1]:PORT or localhost:PORT)")
	chunkDelay := fs.Duration("chunk-delay", 60*time.Millisecond, "pause between streamed chunks, so the streaming is visible (0: none)")
	quiet := fs.Bool("quiet", false, "do not log each request on stderr")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sessiond-fakemodel: unexpected argument %q (see --help)\n", fs.Arg(0))
		return 2
	}
	var log io.Writer = stderr
	if *quiet {
		log = io.Discard
	}
	m, err := start(*listen, *chunkDelay, log)
	if err != nil {
		hint := ""
		if errors.Is(err, syscall.EADDRINUSE) {
			hint = " (another sessiond-fakemodel? pick another port with --listen 127.0.0.1:PORT)"
		}
		fmt.Fprintf(stderr, "sessiond-fakemodel: %v%s\n", err, hint)
		return 1
	}
	defer m.Close()
	printBanner(stdout, m.URL())
	<-ctx.Done()
	fmt.Fprintln(stderr, "sessiond-fakemodel: stopped")
	return 0
}

// start serves the script on addr (loopback only); each request is logged
// as one line on log.
func start(addr string, chunkDelay time.Duration, log io.Writer) (*fakemodel.Model, error) {
	m, err := fakemodel.StartOn(addr)
	if err != nil {
		return nil, err
	}
	m.SetRecording(false) // a long demo session must not keep every request in memory
	var mu sync.Mutex     // DefaultFunc runs under the model's lock; this one only orders the log lines
	m.DefaultFunc(func(r fakemodel.RecordedRequest) fakemodel.Reply {
		reply := script(r)
		reply.ChunkDelay = chunkDelay
		mu.Lock()
		fmt.Fprintf(log, "sessiond-fakemodel: %s\n", describe(r, reply))
		mu.Unlock()
		return reply
	})
	return m, nil
}

// printBanner prints the base URL, the config snippet and the script.
func printBanner(w io.Writer, url string) {
	where := "the daemon's HOME/config.yaml (make run: ./.home/config.yaml)"
	if h := os.Getenv("SESSIOND_HOME"); h != "" {
		if abs, err := filepath.Abs(h); err == nil {
			h = abs
		}
		where = filepath.Join(h, "config.yaml")
	}
	fmt.Fprintf(w, `sessiond-fakemodel: a fake OpenAI-compatible model at %s (Ctrl-C stops it)

Put these lines in %s,
then start the daemon (make run):

model: {provider: openai, default: %s, base_url: %s}
approvals: {mode: manual}

It answers by your latest message:
%s
`, url, where, fakemodel.ModelName, url, scriptHelp)
}
