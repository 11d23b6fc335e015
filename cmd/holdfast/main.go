// Command holdfast is the command-line tool of the holdfast lock library.
//
//	holdfast exec   [OPTIONS] NAME [OPTIONS] -- CMD [ARGS...]
//	holdfast status [--redis URL] [--json] NAME...
//	holdfast leader [--redis URL] [--json] [--watch] NAME
//	holdfast list   [--redis URL] [PATTERN]
//	holdfast force-unlock [--redis URL] NAME...
//	holdfast demo   [--redis URL]
//	holdfast version
//
// `holdfast help` and `holdfast COMMAND --help` describe each command, the
// --redis URL forms and the exit codes.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Exit codes of holdfast itself (the sysexits.h values where one fits).
const (
	exitFailure     = 1
	exitUsage       = 2
	exitUnreachable = 69 // EX_UNAVAILABLE: no Redis server answered
	exitNotTaken    = 75 // EX_TEMPFAIL: the lock was not acquired within --wait
	exitLost        = 76 // the lock was lost while CMD ran
	exitNoPerm      = 77 // EX_NOPERM: Redis refused the user (password or ACL)
)

const exitHelp = `Exit codes: exec ends with CMD's own code (128+N when CMD died of signal N), else
  1 other failure   2 bad usage   69 Redis unreachable   75 not acquired within --wait
  76 lock (or leadership) lost while CMD ran   77 not permitted by Redis (password, ACL)
`

const usage = `usage: holdfast COMMAND [OPTIONS] ARGS

Commands:
  exec          run a command while holding a lock (a distributed flock)
  status        show the holders, TTL and fence of lock names
  leader        show (or --watch) who leads an election
  list          list the lock names held now
  force-unlock  free a lock whoever holds it
  demo          a short story of workers sharing one lock
  version       print holdfast's version (also holdfast --version)

Run holdfast COMMAND --help for its options.

` + connHelp + "\n" + exitHelp

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// command is one subcommand: its help text and its body.
type command struct {
	help string
	main func(args []string, stdout, stderr io.Writer) (int, error)
	// local: the command talks to no Redis, so its help leaves out the
	// --redis URL forms and exit codes.
	local bool
}

// fullHelp is c's help text as `holdfast help COMMAND` prints it.
func (c command) fullHelp() string {
	if c.local {
		return c.help
	}
	return c.help + "\n" + connHelp + "\n" + exitHelp
}

var commands map[string]command

func init() {
	commands = map[string]command{
		"exec":         {help: execHelp, main: execMain},
		"status":       {help: statusHelp, main: statusMain},
		"leader":       {help: leaderHelp, main: leaderMain},
		"list":         {help: listHelp, main: listMain},
		"force-unlock": {help: forceUnlockHelp, main: forceUnlockMain},
		"demo":         {help: demoHelp, main: func(args []string, stdout, _ io.Writer) (int, error) { return demoMain(args, stdout) }},
		"version":      {help: versionHelp, main: versionMain, local: true},
	}
}

// usageError is bad input on the command line: one line on stderr, exit 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// errHelp asks for the command's help on stdout and exit 0.
var errHelp = errors.New("help requested")

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				fmt.Fprint(stdout, c.fullHelp())
				return 0
			}
		}
		fmt.Fprint(stdout, usage)
		return 0
	case "-version", "--version":
		args = append([]string{"version"}, args[1:]...)
	}
	c, ok := commands[args[0]]
	if !ok {
		return fail(stderr, exitUsage, usageError{fmt.Sprintf("unknown command %q (want exec, status, leader, list, force-unlock, demo or version; see holdfast help)", args[0])})
	}
	code, err := c.main(args[1:], stdout, stderr)
	if errors.Is(err, errHelp) {
		fmt.Fprint(stdout, c.fullHelp())
		return 0
	}
	if err != nil {
		return fail(stderr, code, err)
	}
	return code
}

// fail prints err as one line with one "holdfast:" prefix and returns the
// exit code: code if set, else the code err carries, else exitFailure.
func fail(stderr io.Writer, code int, err error) int {
	var ce codedError
	var ue usageError
	switch {
	case code != 0:
	case errors.As(err, &ce):
		code = ce.code
	case errors.As(err, &ue):
		code = exitUsage
	default:
		code = exitFailure
	}
	fmt.Fprintf(stderr, "holdfast: %s\n", message(err))
	return code
}

// message is err's text on one line, without the library's own "holdfast: "
// prefixes (the line gets one), and without secrets.
func message(err error) string {
	msg := err.Error()
	for strings.HasPrefix(msg, "holdfast: ") {
		msg = strings.TrimPrefix(msg, "holdfast: ")
	}
	msg = strings.ReplaceAll(msg, ": holdfast: ", ": ")
	msg = strings.ReplaceAll(msg, "\n", " ")
	return redact(msg)
}

// newFlagSet returns a flag set that reports errors instead of printing.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseArgs parses flags wherever they stand among the positional
// arguments (before NAME, between names) and returns the positional ones.
// A "--" ends the flags: what follows it is positional.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errHelp
			}
			return nil, usageError{fs.Name() + ": " + err.Error()}
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		if len(rest) == 0 {
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}
