package io.orbitkv.core;

import static java.util.Map.entry;
import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.core.SourceTree.Kind;
import io.orbitkv.core.SourceTree.SourceFile;
import java.io.IOException;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The build has no back arrow, inside a module or between modules. Inside each module the
 * packages form no cycle: each depends only on packages below it, so a newcomer reads a module
 * bottom-up and a change in a lower package cannot be undone by an upper one. Between modules,
 * every arrow the code draws and every dependency a pom declares is an arrow of
 * {@link #MODULE_GRAPH}, which is acyclic. Runs in {@code orbitkv-core} and reads every module's
 * sources ({@link SourceTree}); each check is also run on a synthetic tree where it must fail.
 */
class PackageCyclesTest {

    private static final String TESTKIT = "orbitkv-testkit";

    /**
     * module → the modules its main code may use; its tests may use these and the testkit. The
     * architecture's module table (docs/architecture.md): the state contracts depend on the JDK only,
     * the core on them only, the client never on the core, the server on both; the engine
     * adapters, the benchmarks and the reliability campaign sit above. A new arrow is added here
     * and in the pom together.
     */
    static final Map<String, Set<String>> MODULE_GRAPH = Map.ofEntries(
            entry(TESTKIT, Set.of()),
            entry("orbitkv-state", Set.of()),
            entry("orbitkv-testmodel", Set.of()),
            entry("orbitkv-core", Set.of("orbitkv-state")),
            entry("orbitkv-client", Set.of("orbitkv-state")),
            entry("orbitkv-router", Set.of("orbitkv-state")),
            entry("orbitkv-server", Set.of("orbitkv-state", "orbitkv-core", "orbitkv-client", "orbitkv-router")),
            entry("orbitkv-engine", Set.of("orbitkv-state", "orbitkv-client", "orbitkv-server", TESTKIT)),
            entry("orbitkv-jlama", Set.of("orbitkv-state", "orbitkv-client", "orbitkv-engine", "orbitkv-testmodel", "orbitkv-server")),
            entry("orbitkv-llamacpp", Set.of("orbitkv-state", "orbitkv-engine", "orbitkv-testmodel", "orbitkv-server", TESTKIT)),
            entry("orbitkv-bench", Set.of("orbitkv-state", "orbitkv-core", "orbitkv-client", "orbitkv-server", "orbitkv-router",
                    TESTKIT)),
            entry("orbitkv-bench-ttft", Set.of("orbitkv-state", "orbitkv-router", "orbitkv-server", "orbitkv-bench",
                    "orbitkv-engine", "orbitkv-jlama", "orbitkv-llamacpp", "orbitkv-testmodel", TESTKIT)),
            entry("orbitkv-reliability", Set.of("orbitkv-state", "orbitkv-core", "orbitkv-client", "orbitkv-server", TESTKIT)),
            entry("orbitkv-dist", Set.of("orbitkv-state", "orbitkv-client", "orbitkv-server")));

    private static final Pattern DEPENDENCY = Pattern.compile("<dependency>(.*?)</dependency>", Pattern.DOTALL);
    private static final Pattern NOT_THE_MODULES_OWN =
            Pattern.compile("<parent>.*?</parent>|<dependencyManagement>.*?</dependencyManagement>|<build>.*?</build>", Pattern.DOTALL);
    private static final Pattern ARTIFACT = Pattern.compile("<groupId>io\\.orbitkv</groupId>\\s*<artifactId>([^<]+)</artifactId>");
    private static final Pattern TEST_SCOPE = Pattern.compile("<scope>test</scope>");

    @Test
    void everyModulesPackagesFormNoCycle() throws IOException {
        SourceTree tree = SourceTree.read();
        assertThat(tree.packagesOf("orbitkv-core")).as("packages found under " + SourceTree.ROOT).contains("io.orbitkv.core.engine");
        List<String> cycles = new ArrayList<>();
        for (String module : tree.modules()) cycles.addAll(SourceTree.cycles(tree.packageEdges(module)).values());
        assertThat(cycles).as(String.join("\n", cycles)).isEmpty();
    }

    @Test
    void noPackageIsSplitAcrossModules() throws IOException {
        assertThat(SourceTree.read().splitPackages()).as("a package belongs to one module").isEmpty();
    }

    @Test
    void everyArrowBetweenModulesInTheCodeIsInTheGraph() throws IOException {
        SourceTree tree = SourceTree.read();
        assertThat(MODULE_GRAPH.keySet()).as("the graph names every module of the build").containsExactlyInAnyOrderElementsOf(tree.modules());
        assertThat(undeclaredArrows(tree, MODULE_GRAPH)).isEmpty();
    }

    @Test
    void everyDependencyOfThePomsIsInTheGraph() throws IOException {
        List<String> undeclared = new ArrayList<>();
        for (String module : SourceTree.read().modules()) {
            String pom = NOT_THE_MODULES_OWN.matcher(Files.readString(SourceTree.ROOT.resolve(module).resolve("pom.xml"))).replaceAll(" ");
            Matcher d = DEPENDENCY.matcher(pom);
            while (d.find()) {
                Matcher a = ARTIFACT.matcher(d.group(1));
                if (!a.find() || a.group(1).equals(module)) continue;
                boolean test = TEST_SCOPE.matcher(d.group(1)).find();
                if (!allowed(MODULE_GRAPH, module, a.group(1), test)) {
                    undeclared.add(module + (test ? " (test)" : "") + " -> " + a.group(1) + " in pom.xml");
                }
            }
        }
        assertThat(undeclared).isEmpty();
    }

    @Test
    void theModuleGraphHasNoCycle() {
        assertThat(SourceTree.cycles(asGraph(MODULE_GRAPH)).values()).isEmpty();
    }

    @Test
    void theChecksFailOnASyntheticBackArrowAndCycle() {
        SourceTree tree = new SourceTree(List.of("low", "high"), List.of(
                new SourceFile("low", Kind.MAIN, "io.orbitkv.low", "Low.java", Set.of("io.orbitkv.low.inner")),
                new SourceFile("low", Kind.MAIN, "io.orbitkv.low.inner", "Inner.java", Set.of("io.orbitkv.low", "io.orbitkv.high")),
                new SourceFile("low", Kind.TEST, "io.orbitkv.low", "LowTest.java", Set.of("io.orbitkv.high.proto")),
                new SourceFile("high", Kind.MAIN, "io.orbitkv.high", "High.java", Set.of("io.orbitkv.low", "io.orbitkv.other"))));
        Map<String, Set<String>> graph = Map.of("low", Set.of(), "high", Set.of("low"));
        assertThat(undeclaredArrows(tree, graph)).containsExactly(
                "low (MAIN) -> high in Inner.java", "low (TEST) -> high in LowTest.java");
        assertThat(SourceTree.cycles(tree.packageEdges("low")).keySet())
                .singleElement().satisfies(c -> assertThat(c).containsExactlyInAnyOrder("io.orbitkv.low", "io.orbitkv.low.inner"));
        assertThat(SourceTree.cycles(tree.packageEdges("high"))).isEmpty();
        assertThat(SourceTree.cycles(asGraph(Map.of("low", Set.of("high"), "high", Set.of("low"))))).hasSize(1);
        assertThat(SourceTree.references("import io.orbitkv.core.x.Y; import io.orbitkv.core.w.*; // io.orbitkv.core.z.W\n"
                + "\"io.orbitkv.core.q.R\" /* io.orbitkv.core.s.T */ io.orbitkv.core.v.V.of()"))
                .containsExactly("io.orbitkv.core.v", "io.orbitkv.core.w", "io.orbitkv.core.x");
    }

    /** Arrows from one module's code to another's that the graph does not declare, with the file drawing each. */
    static List<String> undeclaredArrows(SourceTree tree, Map<String, Set<String>> graph) {
        Set<String> out = new TreeSet<>();
        for (SourceFile f : tree.files()) {
            for (String target : f.references()) {
                tree.owner(target).filter(to -> !to.equals(f.module()))
                        .filter(to -> !allowed(graph, f.module(), to, f.kind() == Kind.TEST))
                        .ifPresent(to -> out.add(f.module() + " (" + f.kind() + ") -> " + to + " in " + f.name()));
            }
        }
        return List.copyOf(out);
    }

    private static boolean allowed(Map<String, Set<String>> graph, String from, String to, boolean test) {
        return graph.getOrDefault(from, Set.of()).contains(to) || (test && to.equals(TESTKIT));
    }

    private static Map<String, Map<String, Set<String>>> asGraph(Map<String, Set<String>> arrows) {
        Map<String, Map<String, Set<String>>> out = new TreeMap<>();
        arrows.forEach((from, tos) -> tos.forEach(to -> out.computeIfAbsent(from, k -> new TreeMap<>()).put(to, Set.of("graph"))));
        return out;
    }
}
