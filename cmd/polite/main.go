// Command polite fetches URLs politely, shows what an API says of its rate
// limits, demonstrates what polite does against servers that enforce
// limits the way real ones do, and shows a program's polite status page in
// the terminal.
//
// Usage:
//
//	polite get [flags] URL...      fetch URLs politely (-i FILE, or - for stdin)
//	polite inspect [flags] URL     what a server says of its limits, and what polite would do
//	polite demo [flags]            plain client, oracle and polite against local limiters, with a chart
//	polite top [flags] ADDR        a program's polite status page in the terminal, as top shows processes
//
// Each command takes -h. The exit status is 0 on success, 1 when the work
// failed (a URL that could not be fetched, a server that could not be
// reached), and 2 when the command line is wrong.
//
// Install it with go install github.com/politehttp/polite/cmd/polite@latest
// (once a release is tagged), or in a clone of the repository build it with
// go build ./cmd/polite, or run it with go run ./cmd/polite: the clone's
// go.work builds it against the library beside it.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// Exit statuses, as Unix tools use them.
const (
	exitOK      = 0 // the work was done
	exitFailure = 1 // the work failed, wholly or in part
	exitUsage   = 2 // the command line is wrong
)

// env is what a command runs with: its streams and environment, so that
// tests can run a command in process as well as the built binary.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	userCacheDir   func() (string, error) // os.UserCacheDir; nil: none
}

// A command is one subcommand of polite.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, e *env) int
}

func commands() []command {
	return []command{
		{name: "get", summary: "fetch URLs politely", run: runGet},
		{name: "inspect", summary: "show what a server says of its rate limits, and what polite would do", run: runInspect},
		{name: "demo", summary: "plain client, oracle and polite against local rate limiters, with a chart", run: runDemo},
		{name: "top", summary: "show a program's polite status page (Transport.StatusHandler) in the terminal", run: runTop},
	}
}

func main() {
	// The first Ctrl-C cancels the context: requests in flight are
	// cancelled and the command ends cleanly. A second one kills the
	// process, as the default handler does.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	e := &env{
		stdin:        os.Stdin,
		stdout:       os.Stdout,
		stderr:       os.Stderr,
		getenv:       os.Getenv,
		userCacheDir: os.UserCacheDir,
	}
	os.Exit(run(ctx, os.Args[1:], e))
}

// run runs the command line args (without the program's name) and
// returns the exit status.
func run(ctx context.Context, args []string, e *env) int {
	if len(args) == 0 {
		usage(e.stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help", "help":
		usage(e.stdout)
		return exitOK
	case "-version", "--version", "version":
		fmt.Fprintln(e.stdout, "polite", version())
		return exitOK
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(ctx, args[1:], e)
		}
	}
	fmt.Fprintf(e.stderr, "polite: unknown command %q\n\n", name)
	usage(e.stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "polite %s: HTTP calls that are well-behaved toward the servers they reach\n\nUsage:\n  polite <command> [flags] [arguments]\n\nCommands:\n", version())
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun polite <command> -h for a command's flags.\nExit status: 0 done, 1 failed (wholly or in part), 2 wrong command line.\n")
}

// newFlagSet returns a flag set for a subcommand that reports errors
// itself (so that the command returns exitUsage rather than the process
// exiting), with a usage text of head followed by the flags.
func newFlagSet(name, head string, e *env) *flag.FlagSet {
	fs := flag.NewFlagSet("polite "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), head)
		fmt.Fprintln(fs.Output(), "\nFlags:")
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args into fs. It returns -1 if the command should go
// on, or the exit status to return now: exitOK after -h (the usage went
// to stdout), exitUsage after a bad flag (the error went to stderr).
func parseFlags(fs *flag.FlagSet, args []string, e *env) int {
	// The flag package prints the usage on -h, and the error and usage
	// on a bad flag, to its output: hold them until it is known which.
	var held bytes.Buffer
	fs.SetOutput(&held)
	err := fs.Parse(args)
	fs.SetOutput(e.stderr)
	switch {
	case err == nil:
		return -1
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(e.stdout)
		fs.Usage()
		fs.SetOutput(e.stderr)
		return exitOK
	default:
		_, _ = held.WriteTo(e.stderr)
		return exitUsage
	}
}

// usageError reports a wrong command line and returns exitUsage.
func usageError(fs *flag.FlagSet, format string, args ...any) int {
	fmt.Fprintf(fs.Output(), "%s: %s\nRun %s -h for help.\n", fs.Name(), fmt.Sprintf(format, args...), fs.Name())
	return exitUsage
}

// version returns the module version polite was built from, or "devel".
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}
