package io.orbitkv.server.cli;

import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * The {@code orbitkv} command line: one subcommand per user task.
 *
 * <p>One instance per invocation, run on the caller's thread. {@link #run(PrintWriter,
 * PrintWriter, String...)} is the single error boundary: bad input (unknown options, malformed
 * values, {@link InputException}) becomes one line {@code orbitkv: error: ...} on the error
 * stream and exit status 2; an unexpected exception becomes one line {@code orbitkv: internal
 * error: ...} and status 1. No stack trace reaches a user.
 */
@Command(name = "orbitkv", mixinStandardHelpOptions = true, versionProvider = Version.class,
        description = "OrbitKV: a KV-cache manager for LLM inference.",
        subcommands = {CommandLine.HelpCommand.class, KeysCommand.class, BoundaryCommand.class,
            ManagerCommand.class, ClusterCommand.class, StatusCommand.class, RouterCommand.class})
public final class OrbitKvCli implements Runnable {

    /** Exit status for bad input. */
    public static final int EXIT_BAD_INPUT = 2;
    /** Exit status for an unexpected failure. */
    public static final int EXIT_INTERNAL = 1;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    public static void main(String[] args) {
        System.exit(run(args));
    }

    /** Runs the CLI on the process's streams and returns its exit code (no {@code System.exit}). */
    public static int run(String... args) {
        PrintWriter out = new PrintWriter(System.out, true, StandardCharsets.UTF_8);
        PrintWriter err = new PrintWriter(System.err, true, StandardCharsets.UTF_8);
        return run(out, err, args);
    }

    /** Runs the CLI writing to {@code out} and {@code err}; returns the exit code. */
    public static int run(PrintWriter out, PrintWriter err, String... args) {
        CommandLine cli = new CommandLine(new OrbitKvCli());
        cli.setOut(out);
        cli.setErr(err);
        cli.setParameterExceptionHandler((e, a) -> {
            err.println("orbitkv: error: " + oneLine(e.getMessage()));
            err.flush();
            return EXIT_BAD_INPUT;
        });
        cli.setExecutionExceptionHandler((e, c, parsed) -> {
            if (e instanceof InputException) {
                err.println("orbitkv: error: " + oneLine(e.getMessage()));
                err.flush();
                return EXIT_BAD_INPUT;
            }
            err.println("orbitkv: internal error: " + e.getClass().getSimpleName() + ": " + oneLine(String.valueOf(e.getMessage())));
            err.flush();
            return EXIT_INTERNAL;
        });
        int code = cli.execute(args);
        out.flush();
        err.flush();
        return code;
    }

    private static String oneLine(String message) {
        return message.replaceAll("\\s*[\\r\\n]+\\s*", " ").strip();
    }

    @Override
    public void run() {
        spec.commandLine().usage(spec.commandLine().getOut());
    }
}
