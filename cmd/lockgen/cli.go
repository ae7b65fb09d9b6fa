package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/lockgen/lockgen/generator/spec"
	"github.com/lockgen/lockgen/internal/suggest"
)

// Exit codes.
const (
	exitOK    = 0 // success; for check: the output on disk is up to date
	exitFail  = 1 // failure; for check: stale or missing output
	exitUsage = 2 // bad command line
)

// defaultSpec is the spec file the commands read when -f is not given.
const defaultSpec = "lockgen.yaml"

// self is how messages tell the user to run lockgen: as the tool dependency
// the README sets up (go get -tool), from within the module.
const self = "go tool lockgen"

// command is one lockgen subcommand.
type command struct {
	name    string
	args    string // the arguments after the name, for usage lines
	summary string // one line for the command list
	doc     string // the help text after the usage line
	// hidden commands are left out of the command list.
	hidden bool
	// setup defines the command's flags on fs and returns the function
	// that runs it once they are parsed; nil for commands that take their
	// arguments verbatim.
	setup func(fs *flag.FlagSet) runFunc
	// positional names the arguments a setup command takes besides its
	// flags (before, between or after them), all required unless
	// optional, which lets them all be left out.
	positional []string
	optional   bool
	// raw runs a command that parses its own arguments.
	raw runFunc
}

// runFunc runs a command with its positional arguments and returns the
// exit code.
type runFunc func(ctx context.Context, out *streams, args []string) int

// streams are where a command writes.
type streams struct {
	stdout, stderr io.Writer
}

// commands returns the subcommands, in the order help lists them.
func commands() []*command {
	return append([]*command{generateCommand(), checkCommand(), doctorCommand(), initCommand()},
		append(opsCommands(), versionCommand(), sqlcCommand())...)
}

// run executes the lockgen command line args (without the program name),
// writing to stdout and stderr, and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	out := &streams{stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		fmt.Fprint(stderr, mainUsage())
		return exitUsage
	}
	switch name := args[0]; name {
	case "-h", "-help", "--help":
		fmt.Fprint(stdout, mainUsage())
		return exitOK
	case "help":
		return help(out, args[1:])
	default:
		cmd := lookup(name)
		if cmd == nil {
			fmt.Fprintf(stderr, "lockgen: %s\nRun '%s help' for usage.\n", unknownCommand(name), self)
			return exitUsage
		}
		return cmd.run(context.Background(), out, args[1:])
	}
}

// lookup returns the command called name, or nil.
func lookup(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

// unknownCommand says that name is no command, suggesting the visible
// command it probably means ("gen": "did you mean generate?").
func unknownCommand(name string) string {
	var names []string
	for _, c := range commands() {
		if !c.hidden {
			names = append(names, c.name)
		}
	}
	names = append(names, "help")
	msg := fmt.Sprintf("unknown command %q", name)
	if s, ok := suggest.Command(name, names); ok {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg
}

// run parses the command's flags and runs it.
func (c *command) run(ctx context.Context, out *streams, args []string) int {
	if c.raw != nil {
		return c.raw(ctx, out, args)
	}
	fs := c.flagSet()
	runCmd := c.setup(fs)
	var positional []string
	for {
		err := fs.Parse(args)
		switch {
		case errors.Is(err, flag.ErrHelp):
			fmt.Fprint(out.stdout, c.help())
			return exitOK
		case err != nil:
			return c.usageError(out, err.Error())
		}
		if fs.NArg() == 0 {
			break
		}
		if len(positional) == len(c.positional) {
			return c.usageError(out, fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(positional) < len(c.positional) && !(c.optional && len(positional) == 0) {
		return c.usageError(out, "missing "+c.positional[len(positional)])
	}
	return runCmd(ctx, out, positional)
}

// flagSet returns an empty flag set for c that reports nothing itself.
func (c *command) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("lockgen "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// usageError reports a bad command line for c and returns exitUsage.
func (c *command) usageError(out *streams, msg string) int {
	fmt.Fprintf(out.stderr, "lockgen %s: %s\nUsage: %s\nRun '%s help %s' for details.\n", c.name, msg, c.usageLine(), self, c.name)
	return exitUsage
}

// usageLine is "lockgen <name> <args>".
func (c *command) usageLine() string {
	return strings.TrimSpace("lockgen " + c.name + " " + c.args)
}

// help is the full help text of c: usage, description and flags.
func (c *command) help() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s\n\n%s\n", c.usageLine(), c.doc)
	if c.setup == nil {
		return b.String()
	}
	fs := c.flagSet()
	c.setup(fs)
	var flags bytes.Buffer
	fs.SetOutput(&flags)
	fs.PrintDefaults()
	if flags.Len() > 0 {
		fmt.Fprintf(&b, "\nFlags:\n%s", flags.String())
	}
	return b.String()
}

// help runs `lockgen help [command]`.
func help(out *streams, args []string) int {
	switch {
	case len(args) == 0:
		fmt.Fprint(out.stdout, mainUsage())
		return exitOK
	case len(args) > 1:
		fmt.Fprintf(out.stderr, "lockgen help: too many arguments\nUsage: lockgen help [command]\n")
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(out.stdout, "Usage: lockgen help [command]\n\nHelp shows what lockgen or one of its commands does, and its flags.\n")
		return exitOK
	}
	cmd := lookup(args[0])
	if cmd == nil {
		fmt.Fprintf(out.stderr, "lockgen help: %s\nRun '%s help' for usage.\n", unknownCommand(args[0]), self)
		return exitUsage
	}
	fmt.Fprint(out.stdout, cmd.help())
	return exitOK
}

// mainUsage is the help text of lockgen itself.
func mainUsage() string {
	var b strings.Builder
	b.WriteString(`lockgen generates typed Go wrappers, sqlc queries and SQL migrations for the
distributed locks and jobs declared in lockgen.yaml.

Usage:

	go tool lockgen <command> [flags]

in a module that has lockgen as a tool dependency (go get -tool), or
lockgen <command> [flags] when it is installed on your PATH.

Commands:

`)
	for _, c := range commands() {
		if !c.hidden {
			fmt.Fprintf(&b, "	%-10s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprintf(&b, "	%-10s %s\n", "help", "show help for a command")
	b.WriteString(`
Run 'go tool lockgen help <command>' for a command's flags.

Exit status: 0 on success, 1 on failure or stale output, 2 on a usage error.
`)
	return b.String()
}

// printError writes err to stderr: a spec.ErrorList one problem per line
// ("file:line:col: message (hint)"), anything else as "lockgen: <error>".
func printError(stderr io.Writer, err error) {
	if list, ok := errors.AsType[spec.ErrorList](err); ok {
		fmt.Fprintln(stderr, list.Error())
		return
	}
	fmt.Fprintf(stderr, "lockgen: %v\n", err)
}
