package io.orbitkv.server.cli;

import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * {@code orbitkv cluster}: tools that talk to a running cluster of Managers from outside it
 * ({@code locate}: who holds which key; {@code demo}: a cross-node hit end to end). Without a
 * subcommand it prints its usage. Stateless.
 */
@Command(name = "cluster", mixinStandardHelpOptions = true,
        description = "Ask a running cluster of Managers: where keys are, or show a cross-node hit.",
        subcommands = {ClusterLocateCommand.class, ClusterDemoCommand.class})
final class ClusterCommand implements Runnable {

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public void run() {
        spec.commandLine().usage(spec.commandLine().getOut());
    }
}
