package io.orbitkv.server.daemon;

import io.orbitkv.testkit.Environment;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Headless Chromium (Debian {@code chromium}, {@code /usr/bin/chromium}) without a driver: one
 * process per page load, {@code --dump-dom} for the DOM after scripts ran, {@code --screenshot}
 * for a PNG. {@code --virtual-time-budget} lets the page's fetches and timers run before the
 * dump. Runs as root in CI, hence {@code --no-sandbox}; each run gets a new empty profile.
 */
final class Chromium {

    static final Path BINARY = Path.of("/usr/bin/chromium");

    private Chromium() {
    }

    /** Skips the calling test when Chromium is not installed; fails it under CI's switch ({@link Environment}). */
    static void requireInstalled() {
        Environment.require(Files.isExecutable(BINARY),
                "chromium at " + BINARY + " (apt-get install -y chromium; .ci/run does this)");
    }

    private static List<String> command(Path profile, String... extra) {
        List<String> cmd = new ArrayList<>(List.of(BINARY.toString(), "--headless", "--no-sandbox", "--disable-gpu",
                "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-dev-shm-usage", "--user-data-dir=" + profile));
        cmd.addAll(List.of(extra));
        return cmd;
    }

    private static String run(Path work, List<String> cmd, Path stdout) throws IOException, InterruptedException {
        Path stderr = Files.createTempFile(work, "chromium-", ".err");
        Process p = new ProcessBuilder(cmd).redirectOutput(stdout.toFile()).redirectError(stderr.toFile()).start();
        if (!p.waitFor(90, TimeUnit.SECONDS)) {
            p.destroyForcibly().waitFor();
            throw new AssertionError("chromium did not finish in 90 s: " + Files.readString(stderr));
        }
        if (p.exitValue() != 0) throw new AssertionError("chromium exited " + p.exitValue() + ": " + Files.readString(stderr));
        return Files.readString(stdout, StandardCharsets.UTF_8);
    }

    /** The DOM of {@code url} after {@code budgetMillis} of virtual time (scripts, fetches, timers). */
    static String dumpDom(Path work, String url, int budgetMillis) throws IOException, InterruptedException {
        Path profile = Files.createTempDirectory(work, "chromium-profile-");
        return run(work, command(profile, "--virtual-time-budget=" + budgetMillis, "--dump-dom", url),
                Files.createTempFile(work, "dom-", ".html"));
    }

    /** Saves a {@code width}x{@code height} PNG of {@code url} to {@code png} after {@code budgetMillis}. */
    static void screenshot(Path work, String url, Path png, int width, int height, int budgetMillis)
            throws IOException, InterruptedException {
        Path profile = Files.createTempDirectory(work, "chromium-profile-");
        Files.createDirectories(png.toAbsolutePath().getParent());
        run(work, command(profile, "--virtual-time-budget=" + budgetMillis, "--hide-scrollbars",
                "--window-size=" + width + "," + height, "--screenshot=" + png.toAbsolutePath(), url),
                Files.createTempFile(work, "screenshot-", ".out"));
    }
}
