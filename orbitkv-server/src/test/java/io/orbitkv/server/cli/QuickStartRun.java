package io.orbitkv.server.cli;

import io.orbitkv.testkit.Environment;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Pattern;

/**
 * Runs the README's "Quick start" as a newcomer does, in two shells: the section's first {@code sh}
 * block (the Manager) in one, until it prints its ready line; the other {@code sh} blocks, joined,
 * under {@code bash -e} in the other; then Ctrl-C (SIGINT) for the Manager. The blocks are read
 * from the README by {@link ReadmeBlocks}; nothing is copied. Every plain block that follows an
 * {@code sh} block is the output the README shows for it, and {@link Result#missingShownLines}
 * lists each shown line that the run did not print ({@code ...} in a shown line stands for text
 * that differs per run: paths, pids).
 *
 * <p>Used for the source tree with a stand-in launcher ({@code ReadmeQuickStartTest}) and for the
 * unpacked release tarball with its own {@code bin/orbitkv} (orbitkv-dist's test). Not
 * thread-safe; one run at a time per working directory. The quick start uses the Manager's
 * defaults, so the run refuses to start while the default HTTP port is taken (a Manager already
 * running on this host would also hold the default DRAM directory).
 */
public final class QuickStartRun {

    public static final String SECTION = "## Quick start";
    public static final String READY = "orbitkv manager ready ";

    private QuickStartRun() {
    }

    /**
     * What a run printed. {@code managerExit} is the Manager's status after Ctrl-C (-1 if it had
     * to be killed), {@code stepsExit} that of the other blocks (-1 past the limit).
     */
    public record Result(String managerOutput, String stepsOutput, int managerExit, int stepsExit,
            List<String> missingShownLines) {
    }

    /**
     * Runs the quick start of {@code readme} in {@code workDir} with {@code env} added to this
     * process's environment; each half (Manager ready, the other blocks) waits at most {@code limit}.
     */
    public static Result run(String readme, Path workDir, Map<String, String> env, Duration limit)
            throws IOException, InterruptedException {
        List<ReadmeBlocks.Block> blocks = ReadmeBlocks.section(readme, SECTION);
        List<ReadmeBlocks.Block> shell = blocks.stream().filter(ReadmeBlocks.Block::isShell).toList();
        if (shell.size() < 2) throw new IllegalArgumentException("the quick start needs the Manager's block and at least one step");
        requireFree(io.orbitkv.server.config.ManagerConfig.DEFAULT_HTTP_PORT);

        Path managerScript = Files.writeString(workDir.resolve("quickstart-manager.sh"), shell.getFirst().text());
        StringBuilder steps = new StringBuilder();
        for (ReadmeBlocks.Block b : shell.subList(1, shell.size())) steps.append(b.text());
        Path stepsScript = Files.writeString(workDir.resolve("quickstart-steps.sh"), steps.toString());

        // SIGINT back to its default for the Manager's block, as in a terminal's foreground job: a
        // harness started in the background of a non-interactive shell ignores SIGINT, every child
        // inherits that, and a JVM that starts with SIGINT ignored installs no handler for it.
        ProcessBuilder mb = new ProcessBuilder("env", "--default-signal=INT", "bash", "-e", managerScript.toString())
                .directory(workDir.toFile())
                .redirectErrorStream(true);
        mb.environment().putAll(env);
        Process manager = mb.start();
        StringBuilder managerOut = new StringBuilder();
        CompletableFuture<Void> ready = new CompletableFuture<>();
        Thread reader = Thread.ofPlatform().name("quickstart-manager-output").daemon().start(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(manager.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    synchronized (managerOut) {
                        managerOut.append(line).append('\n');
                    }
                    if (line.startsWith(READY)) ready.complete(null);
                }
                ready.completeExceptionally(new IOException("the Manager's output ended before its ready line"));
            } catch (IOException e) {
                ready.completeExceptionally(e);
            }
        });

        int stepsExit = -1;
        String stepsOut = "";
        int managerExit;
        try {
            try {
                ready.get(limit.toMillis(), TimeUnit.MILLISECONDS);
            } catch (java.util.concurrent.ExecutionException | TimeoutException e) {
                throw new AssertionError("the Manager block did not print its ready line within " + limit
                        + " (" + e + "); its output:\n" + text(managerOut), e);
            }
            Path log = workDir.resolve("quickstart-steps.log");
            ProcessBuilder sb = new ProcessBuilder("bash", "-e", stepsScript.toString()).directory(workDir.toFile())
                    .redirectErrorStream(true).redirectOutput(log.toFile());
            sb.environment().putAll(env);
            Process stepsProcess = sb.start();
            try {
                if (stepsProcess.waitFor(limit.toMillis(), TimeUnit.MILLISECONDS)) stepsExit = stepsProcess.exitValue();
            } finally {
                stepsProcess.descendants().forEach(ProcessHandle::destroyForcibly);
                stepsProcess.destroyForcibly();
            }
            stepsOut = Files.readString(log);
        } finally {
            managerExit = interrupt(manager, limit);
            reader.join(limit.toMillis());
        }
        String managerText = text(managerOut);
        return new Result(managerText, stepsOut, managerExit, stepsExit,
                missingShownLines(blocks, managerText + stepsOut));
    }

    /** Ctrl-C: SIGINT to the block's processes (the launcher execs the JVM), then the exit status; -1 if killed. */
    private static int interrupt(Process block, Duration limit) throws InterruptedException {
        List<ProcessHandle> all = new ArrayList<>(block.descendants().toList());
        all.add(block.toHandle());
        for (ProcessHandle p : all) signal("INT", p.pid());
        if (block.waitFor(limit.toMillis(), TimeUnit.MILLISECONDS)) return block.exitValue();
        block.descendants().forEach(ProcessHandle::destroyForcibly);
        block.destroyForcibly();
        block.waitFor(limit.toMillis(), TimeUnit.MILLISECONDS);
        return -1;
    }

    private static void signal(String name, long pid) throws InterruptedException {
        try {
            new ProcessBuilder("kill", "-" + name, Long.toString(pid)).redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD).start().waitFor();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot run kill", e);
        }
    }

    /** Each line of a shown output (a plain block right after an sh block) that {@code printed} lacks. */
    static List<String> missingShownLines(List<ReadmeBlocks.Block> blocks, String printed) {
        List<String> missing = new ArrayList<>();
        for (int i = 1; i < blocks.size(); i++) {
            if (!blocks.get(i).info().isEmpty() || !blocks.get(i - 1).isShell()) continue;
            for (String shown : blocks.get(i).text().lines().filter(l -> !l.isBlank()).toList()) {
                StringBuilder regex = new StringBuilder("(?m)^");
                String[] parts = shown.split("\\.\\.\\.", -1);
                for (int p = 0; p < parts.length; p++) {
                    if (p > 0) regex.append(".*");
                    regex.append(Pattern.quote(parts[p]));
                }
                regex.append("$");
                if (!Pattern.compile(regex.toString()).matcher(printed).find()) missing.add(shown);
            }
        }
        return missing;
    }

    /** What the quick start's commands run besides the launcher: python3 and curl on the PATH. */
    public static void requireTools() {
        for (String tool : List.of("python3", "curl")) {
            Environment.require(onPath(tool), tool + " on the PATH (the README's quick start runs it)");
        }
    }

    static boolean onPath(String tool) {
        for (String dir : System.getenv().getOrDefault("PATH", "/usr/bin:/bin").split(":")) {
            if (!dir.isEmpty() && Files.isExecutable(Path.of(dir, tool))) return true;
        }
        return false;
    }

    private static void requireFree(int port) throws IOException {
        try (ServerSocket s = new ServerSocket(port, 1, InetAddress.getLoopbackAddress())) {
            s.getLocalPort();
        } catch (IOException taken) {
            throw new IOException("127.0.0.1:" + port + " is taken: the README's quick start runs a Manager with its"
                    + " defaults (HTTP port " + port + ", DRAM in /dev/shm/orbitkv-$USER); stop the Manager running"
                    + " on this host before this test", taken);
        }
    }

    private static String text(StringBuilder sb) {
        synchronized (sb) {
            return sb.toString();
        }
    }
}
