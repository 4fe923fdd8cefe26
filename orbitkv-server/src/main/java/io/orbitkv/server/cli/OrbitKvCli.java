package io.orbitkv.server.cli;

import picocli.CommandLine;
import picocli.CommandLine.Command;

/** The {@code orbitkv} command line: one subcommand per user task. */
@Command(name = "orbitkv", mixinStandardHelpOptions = true, version = "OrbitKV 0.1.0",
        description = "OrbitKV: a KV-cache manager for LLM inference.",
        subcommands = {CommandLine.HelpCommand.class})
public final class OrbitKvCli implements Runnable {

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    public static void main(String[] args) {
        System.exit(run(args));
    }

    /** Runs the CLI and returns its exit code (for tests: no {@code System.exit}). */
    public static int run(String... args) {
        return new CommandLine(new OrbitKvCli()).execute(args);
    }

    @Override
    public void run() {
        spec.commandLine().usage(System.out);
    }
}
