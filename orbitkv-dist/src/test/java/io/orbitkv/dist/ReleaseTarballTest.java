package io.orbitkv.dist;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.server.cli.QuickStartRun;
import io.orbitkv.server.config.ManagerConfig;
import io.orbitkv.testkit.Environment;
import io.orbitkv.testkit.ProcessTest;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The release tarball as a user gets it: {@code orbitkv-<version>.tar.gz} (built by this module at
 * {@code package}) unpacked by {@code tar} into a temporary directory, then used with nothing but
 * that tree, a JDK 25 and Python 3: no Maven, no sources.
 *
 * <p>Asserts: the tree holds the launcher, the jars, the example configuration, the systemd unit,
 * the Python client, the Java example, docs and licences, and no build files; the Python wheel
 * installs into a fresh virtual environment with no registry and imports; {@code bin/orbitkv
 * --version} prints this build's version and commit; commands that need a checkout say so; the
 * README's quick start, read from the README inside the tarball, runs as written from the unpacked
 * tree with its own launcher ({@link QuickStartRun}: a Manager started by {@code bin/orbitkv
 * manager}, the Python and the Java examples restoring pages with equal bytes, the metrics the
 * README shows) and leaves no build output behind; the example configuration names every key the
 * Manager knows and the Manager accepts it; the systemd unit passes {@code systemd-analyze verify}
 * (on this tree's paths; without the tool the test skips, or fails under CI's switch) and its paths
 * match the example configuration's.
 */
@ProcessTest
class ReleaseTarballTest {

    static final Path TARBALL = Path.of(System.getProperty("orbitkv.tarball", "target/missing.tar.gz"));
    static final String VERSION = System.getProperty("orbitkv.version", "unknown");
    /** Each half of the quick start took 3-10 s here; a release that needs more than this is broken for a newcomer too. */
    static final Duration LIMIT = Duration.ofSeconds(90);
    /** The tarball carries one fat jar (~40 MB, compressed already); past this, something that does not belong got in. */
    static final long MAX_TARBALL_BYTES = 80L << 20;

    @TempDir
    static Path unpacked;
    static Path root;

    @BeforeAll
    static void unpack() throws Exception {
        assertThat(TARBALL).as("the tarball built at package").isRegularFile();
        Result tar = run(unpacked, Map.of(), "tar", "-xzf", TARBALL.toAbsolutePath().toString());
        assertThat(tar.exit()).as("tar -xzf: %s", tar.output()).isZero();
        root = unpacked.resolve("orbitkv-" + VERSION);
        assertThat(root).as("the tarball's top directory").isDirectory();
    }

    @Test
    void theTreeHoldsWhatAUserNeedsAndNoBuildFiles() throws Exception {
        assertThat(Files.size(TARBALL)).as("tarball size").isLessThan(MAX_TARBALL_BYTES);
        assertThat(root.resolve("bin/orbitkv")).isExecutable();
        for (String file : List.of("bin/lib.sh", "lib/orbitkv.jar", "lib/orbitkv-client.jar", "lib/orbitkv-state.jar",
                "etc/orbitkv.json", "systemd/orbitkv.service", "clients/python/orbitkv/client.py",
                "clients/python/examples/quickstart.py", "clients/java/examples/QuickStart.java", "README.md",
                "docs/operations.md", "docs/protocol.md", "docs/performance.md", "LICENSE", "licenses/THIRD-PARTY.txt")) {
            assertThat(root.resolve(file)).as(file).isRegularFile().isNotEmptyFile();
        }
        assertThat(Files.readString(root.resolve("licenses/THIRD-PARTY.txt")))
                .as("the licence list names the libraries inside orbitkv.jar")
                .contains("io.grpc", "com.github.ben-manes.caffeine", "info.picocli", "Apache");
        try (Stream<Path> all = Files.walk(root)) {
            List<String> buildFiles = all.map(p -> root.relativize(p).toString())
                    .filter(p -> p.endsWith("pom.xml") || p.equals("mvnw") || p.contains("/src/") || p.startsWith("src/")
                            || p.endsWith("/target") || p.endsWith(".class") || p.contains("__pycache__"))
                    .toList();
            assertThat(buildFiles).as("build files in the release tree").isEmpty();
        }
    }

    @Test
    void thePythonWheelInstallsIntoAFreshVirtualEnvironmentWithoutAnyDownload() throws Exception {
        Path dist = root.resolve("clients/python/dist");
        List<Path> wheels;
        try (Stream<Path> files = Files.list(dist)) {
            wheels = files.filter(p -> p.getFileName().toString().endsWith("-py3-none-any.whl")).toList();
        }
        assertThat(wheels).as("one orbitkv wheel in clients/python/dist").hasSize(1);
        Path venv = unpacked.resolve("wheel-venv");
        Result create = run(unpacked, Map.of(), "python3", "-m", "venv", venv.toString());
        assertThat(create.exit()).as("python3 -m venv: %s", create.output()).isZero();
        // --no-index: the core has no dependencies, so the install must not need a registry
        Result install = run(unpacked, Map.of(), venv.resolve("bin/pip").toString(), "install", "--no-index", "--no-deps",
                wheels.getFirst().toString());
        assertThat(install.exit()).as("pip install the wheel: %s", install.output()).isZero();
        Result use = run(unpacked, Map.of(), venv.resolve("bin/python").toString(), "-c",
                "import orbitkv.client, orbitkv.pages, orbitkv.identity, importlib.metadata as m;"
                        + " print(m.version('orbitkv'), sorted(m.metadata('orbitkv').get_all('Provides-Extra')))");
        assertThat(use.exit()).as("import the installed package: %s", use.output()).isZero();
        assertThat(use.output()).contains("['lmcache', 'sglang', 'vllm']");
    }

    @Test
    void versionPrintsThisBuildsVersionAndCommit() throws Exception {
        Result version = run(root, env(), "bin/orbitkv", "--version");
        assertThat(version.exit()).as(version.output()).isZero();
        Matcher m = Pattern.compile("(?m)^orbitkv " + Pattern.quote(VERSION) + " \\(commit ([0-9a-f]{7,40})(-dirty)?\\)$")
                .matcher(version.output());
        assertThat(m.find()).as("version line in: %s", version.output()).isTrue();
        Result head = run(Path.of("").toAbsolutePath(), Map.of(), "git", "rev-parse", "HEAD");
        if (head.exit() == 0) {
            assertThat(head.output().strip()).as("the commit the tarball was built from").startsWith(m.group(1));
        }
    }

    @Test
    void commandsThatNeedACheckoutSaySo() throws Exception {
        Result test = run(root, env(), "bin/orbitkv", "test");
        assertThat(test.exit()).isEqualTo(2);
        assertThat(test.output()).contains("'test' needs a source checkout");
        Result build = run(root, env(), "bin/orbitkv", "build");
        assertThat(build.exit()).as("build in a release has nothing to do: %s", build.output()).isZero();
        assertThat(build.output()).contains("is prebuilt");
    }

    @Test
    void theReadmeQuickStartRunsAsWrittenFromTheUnpackedTree() throws Exception {
        QuickStartRun.requireTools();
        String readme = Files.readString(root.resolve("README.md"));

        QuickStartRun.Result run = QuickStartRun.run(readme, root, env(), LIMIT);

        String all = "Manager:\n" + run.managerOutput() + "\nsteps:\n" + run.stepsOutput();
        System.out.print(all);
        assertThat(run.stepsExit()).as("exit status of the quick-start steps; output:%n%s", all).isZero();
        assertThat(run.missingShownLines()).as("lines the README shows that the run did not print; output:%n%s", all)
                .isEmpty();
        assertThat(run.stepsOutput()).contains("restored 4 pages: bytes equal", "bytes equal: true");
        assertThat(run.managerExit()).as("the Manager's exit status after Ctrl-C; output:%n%s", all).isZero();
        assertThat(run.managerOutput()).as("the launcher ran the shipped jar, not Maven").doesNotContain("building");
        try (Stream<Path> all2 = Files.walk(root)) {
            assertThat(all2.filter(p -> p.getFileName().toString().equals("target"))).as("build output in the tree").isEmpty();
        }
    }

    @Test
    void theExampleConfigurationNamesEveryKeyAndTheManagerAcceptsIt() throws Exception {
        Path example = root.resolve("etc/orbitkv.json");
        String text = Files.readString(example);
        ManagerConfig config = ManagerConfig.defaults().withJson(example);

        List<String> lines = text.lines().toList();
        for (String key : ManagerConfig.KEYS.keySet()) {
            int at = -1;
            for (int i = 0; i < lines.size(); i++) {
                if (lines.get(i).strip().matches("(// )?\"" + Pattern.quote(key) + "\":.*")) at = i;
            }
            assertThat(at).as("etc/orbitkv.json names key %s (set, or commented out)", key).isPositive();
            assertThat(lines.get(at - 1).strip()).as("a comment says what %s means", key).startsWith("//");
        }
        Matcher named = Pattern.compile("(?m)^\\s*(?://\\s*)?\"([A-Za-z]+)\":").matcher(text);
        while (named.find()) {
            assertThat(ManagerConfig.KEYS).as("etc/orbitkv.json names only known keys").containsKey(named.group(1));
        }

        String unit = Files.readString(root.resolve("systemd/orbitkv.service"));
        assertThat(unit).contains("User=orbitkv", "Restart=on-failure", "StateDirectory=orbitkv", "RuntimeDirectory=orbitkv",
                "ExecStart=/opt/orbitkv/bin/orbitkv manager --config /etc/orbitkv/orbitkv.json");
        assertThat(config.endpoints().socket()).as("socket in the unit's RuntimeDirectory").isEqualTo(Path.of("/run/orbitkv/manager.sock"));
        assertThat(config.endpoints().readyFile()).isEqualTo(Path.of("/run/orbitkv/manager.ready"));
        assertThat(config.ssd().dir()).as("SSD store in the unit's StateDirectory").isEqualTo(Path.of("/var/lib/orbitkv/ssd"));
        assertThat(config.dram().dir()).isEqualTo(Path.of("/dev/shm/orbitkv"));
        assertThat(config.endpoints().socketMode()).as("engines in group orbitkv may connect").isEqualTo("0660");
    }

    @Test
    void theSystemdUnitVerifies() throws Exception {
        Path analyze = Stream.of(System.getenv().getOrDefault("PATH", "/usr/bin:/bin").split(":"))
                .map(d -> Path.of(d, "systemd-analyze")).filter(Files::isExecutable).findFirst().orElse(null);
        Environment.require(analyze != null, "systemd-analyze on the PATH (Debian package systemd)");
        // verify checks that ExecStart's program exists, so the unit is pointed at this tree instead of /opt/orbitkv
        Path unit = unpacked.resolve("orbitkv.service");
        Files.writeString(unit, Files.readString(root.resolve("systemd/orbitkv.service")).replace("/opt/orbitkv", root.toString()));
        Result verify = run(unpacked, Map.of(), analyze.toString(), "verify", unit.toString());
        assertThat(verify.exit()).as("systemd-analyze verify: %s", verify.output()).isZero();
        assertThat(verify.output()).as("systemd-analyze verify reports nothing about the unit")
                .doesNotContain("orbitkv.service:");
    }

    /** The environment a user's shell would give the launcher: this test's JDK 25 as JAVA_HOME. */
    static Map<String, String> env() {
        return Map.of("JAVA_HOME", System.getProperty("java.home"));
    }

    record Result(int exit, String output) {
    }

    static Result run(Path dir, Map<String, String> env, String... command) throws IOException, InterruptedException {
        ProcessBuilder pb = new ProcessBuilder(new ArrayList<>(List.of(command))).directory(dir.toFile()).redirectErrorStream(true);
        pb.environment().putAll(env);
        Process p = pb.start();
        p.getOutputStream().close();
        byte[] out = p.getInputStream().readAllBytes();
        if (!p.waitFor(LIMIT.toSeconds(), TimeUnit.SECONDS)) {
            p.destroyForcibly();
            return new Result(-1, new String(out, StandardCharsets.UTF_8));
        }
        return new Result(p.exitValue(), new String(out, StandardCharsets.UTF_8));
    }
}
