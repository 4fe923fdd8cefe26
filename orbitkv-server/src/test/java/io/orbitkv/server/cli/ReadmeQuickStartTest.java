package io.orbitkv.server.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.testkit.ProcessTest;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The README's quick start run as written from a source checkout ({@link QuickStartRun}): the
 * Manager with its defaults, the Python example, the Java example and the metrics query, each
 * block read from {@code README.md} now. The working directory is a temporary one laid out like a
 * checkout: {@code bin/orbitkv} is the {@link ReadmeBlocks#standInLauncher stand-in} (the CLI over
 * this test's class path) and {@code clients} is the checkout's. orbitkv-dist's release test runs
 * the same blocks from the unpacked tarball with its real launcher.
 *
 * <p>Asserts: the Manager prints its ready line and stops with status 0 at Ctrl-C; the other blocks
 * exit 0; every output line the README shows is printed (the Python and the Java restores with equal
 * bytes, the hit counters); the README shows the Java example's code as the file has it.
 */
@ProcessTest
class ReadmeQuickStartTest {

    /** Both halves took 5-15 s here (two JVM starts, a Python run, a source-launched Java program). */
    static final Duration LIMIT = Duration.ofSeconds(90);
    static final Path JAVA_EXAMPLE = Path.of("..", "clients", "java", "examples", "QuickStart.java");

    @TempDir
    Path dir;

    @Test
    void theQuickStartRunsAsWrittenAndPrintsWhatTheReadmeShows() throws Exception {
        QuickStartRun.requireTools();
        ReadmeBlocks.standInLauncher(dir.resolve("bin/orbitkv"));
        Files.createSymbolicLink(dir.resolve("clients"), Path.of("..", "clients").toAbsolutePath().normalize());
        String readme = ReadmeBlocks.readme();
        Set<Path> regionsBefore = quickStartRegions();

        QuickStartRun.Result run = QuickStartRun.run(readme, dir, Map.of(), LIMIT);

        String all = "Manager:\n" + run.managerOutput() + "\nsteps:\n" + run.stepsOutput();
        System.out.print(all); // the quick start as a user sees it, in the test report
        assertThat(run.stepsExit()).as("exit status of the quick-start steps; output:%n%s", all).isZero();
        assertThat(run.missingShownLines()).as("lines the README shows that the run did not print; output:%n%s", all)
                .isEmpty();
        assertThat(run.stepsOutput()).contains("restored 4 pages: bytes equal", "bytes equal: true");
        assertThat(run.managerExit()).as("the Manager's exit status after Ctrl-C; output:%n%s", all).isZero();
        assertThat(run.managerOutput()).contains("daemon: stopped in ");
        assertThat(quickStartRegions()).as("region files the examples left behind").isSubsetOf(regionsBefore);
    }

    /** The examples' region files ({@code orbitkv-quickstart-<pid>.region}) in /dev/shm and the temp directory. */
    private static Set<Path> quickStartRegions() throws IOException {
        Set<Path> out = new HashSet<>();
        for (Path d : List.of(Path.of("/dev/shm"), Path.of(System.getProperty("java.io.tmpdir")))) {
            if (!Files.isDirectory(d)) continue;
            try (var files = Files.newDirectoryStream(d, "orbitkv-quickstart-*.region")) {
                files.forEach(out::add);
            }
        }
        return out;
    }

    @Test
    void theReadmeShowsTheJavaExampleAsTheFileHasIt() throws Exception {
        String source = Files.readString(JAVA_EXAMPLE);
        String snippet = source.substring(source.indexOf("// [quickstart]\n") + "// [quickstart]\n".length(),
                source.indexOf("// [/quickstart]"));
        assertThat(normalize(ReadmeBlocks.readme())).contains(normalize(snippet));
    }

    /** Indentation-insensitive comparison: the README shows the snippet dedented. */
    static String normalize(String code) {
        return code.lines().map(String::strip).filter(l -> !l.isEmpty()).reduce("", (a, b) -> a + b + "\n");
    }
}
