package io.orbitkv.core;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The packages of {@code orbitkv-core} form no cycle: each depends only on packages below it, so
 * a newcomer can read the core bottom-up and a change in a lower package cannot be undone by an
 * upper one. Dependencies are read from the sources (imports and fully qualified references,
 * comments and string literals stripped), so a reference in code counts and a mention in prose
 * does not.
 */
class PackageCyclesTest {

    private static final Path SOURCES = Path.of("src/main/java");
    private static final Pattern REFERENCE = Pattern.compile("\\b(io\\.orbitkv\\.core(?:\\.[a-z_][a-z0-9_]*)*)\\.[A-Z]");
    private static final Pattern PACKAGE = Pattern.compile("^package\\s+([\\w.]+);", Pattern.MULTILINE);
    private static final Pattern COMMENTS_AND_STRINGS =
            Pattern.compile("/\\*.*?\\*/|//[^\\n]*|\"(?:\\\\.|[^\"\\\\])*\"|'(?:\\\\.|[^'\\\\])'", Pattern.DOTALL);

    @Test
    void theCorePackagesFormNoCycle() throws IOException {
        Map<String, Map<String, Set<String>>> edges = dependencies();
        assertThat(edges).as("packages found under " + SOURCES.toAbsolutePath()).containsKey("io.orbitkv.core.engine");
        List<List<String>> cycles = stronglyConnected(edges).stream().filter(c -> c.size() > 1).toList();
        StringBuilder why = new StringBuilder();
        for (List<String> cycle : cycles) {
            why.append("\ncycle ").append(cycle).append(':');
            for (String from : cycle) {
                for (String to : cycle) {
                    Set<String> files = edges.getOrDefault(from, Map.of()).get(to);
                    if (files != null) why.append("\n  ").append(from).append(" -> ").append(to).append(" in ").append(files);
                }
            }
        }
        assertThat(cycles).as(why.toString()).isEmpty();
    }

    @Test
    void theScanSeesACycleWhenThereIsOne() {
        Map<String, Map<String, Set<String>>> edges = new TreeMap<>();
        edges.computeIfAbsent("a", k -> new TreeMap<>()).put("b", Set.of("A.java"));
        edges.computeIfAbsent("b", k -> new TreeMap<>()).put("c", Set.of("B.java"));
        edges.computeIfAbsent("c", k -> new TreeMap<>()).put("a", Set.of("C.java"));
        edges.computeIfAbsent("d", k -> new TreeMap<>()).put("a", Set.of("D.java"));
        assertThat(stronglyConnected(edges).stream().filter(c -> c.size() > 1).toList())
                .singleElement().satisfies(c -> assertThat(c).containsExactlyInAnyOrder("a", "b", "c"));
        String code = COMMENTS_AND_STRINGS.matcher("import io.orbitkv.core.x.Y; // io.orbitkv.core.z.W\n\"io.orbitkv.core.q.R\"")
                .replaceAll(" ");
        Matcher m = REFERENCE.matcher(code);
        List<String> found = new ArrayList<>();
        while (m.find()) found.add(m.group(1));
        assertThat(found).containsExactly("io.orbitkv.core.x");
    }

    /** package → package it references → the files that do. */
    private static Map<String, Map<String, Set<String>>> dependencies() throws IOException {
        Map<String, Map<String, Set<String>>> edges = new TreeMap<>();
        try (Stream<Path> files = Files.walk(SOURCES)) {
            for (Path file : files.filter(f -> f.toString().endsWith(".java")).toList()) {
                String source = Files.readString(file);
                Matcher p = PACKAGE.matcher(source);
                if (!p.find()) continue;
                String pkg = p.group(1);
                Map<String, Set<String>> out = edges.computeIfAbsent(pkg, k -> new TreeMap<>());
                Matcher m = REFERENCE.matcher(COMMENTS_AND_STRINGS.matcher(source).replaceAll(" "));
                while (m.find()) {
                    String target = m.group(1);
                    if (!target.equals(pkg)) out.computeIfAbsent(target, k -> new TreeSet<>()).add(file.getFileName().toString());
                }
            }
        }
        return edges;
    }

    /** Tarjan's strongly connected components (recursive: a package graph is a few dozen nodes deep at most). */
    private static List<List<String>> stronglyConnected(Map<String, Map<String, Set<String>>> edges) {
        Map<String, Integer> index = new HashMap<>();
        Map<String, Integer> low = new HashMap<>();
        Deque<String> stack = new ArrayDeque<>();
        Set<String> onStack = new TreeSet<>();
        List<List<String>> out = new ArrayList<>();
        int[] next = {0};
        for (String v : edges.keySet()) {
            if (!index.containsKey(v)) connect(v, edges, index, low, stack, onStack, out, next);
        }
        return out;
    }

    private static void connect(String v, Map<String, Map<String, Set<String>>> edges, Map<String, Integer> index,
                                Map<String, Integer> low, Deque<String> stack, Set<String> onStack,
                                List<List<String>> out, int[] next) {
        index.put(v, next[0]);
        low.put(v, next[0]);
        next[0]++;
        stack.push(v);
        onStack.add(v);
        for (String w : edges.getOrDefault(v, Map.of()).keySet()) {
            if (!index.containsKey(w)) {
                connect(w, edges, index, low, stack, onStack, out, next);
                low.put(v, Math.min(low.get(v), low.get(w)));
            } else if (onStack.contains(w)) {
                low.put(v, Math.min(low.get(v), index.get(w)));
            }
        }
        if (low.get(v).equals(index.get(v))) {
            List<String> component = new ArrayList<>();
            String w;
            do {
                w = stack.pop();
                onStack.remove(w);
                component.add(w);
            } while (!w.equals(v));
            out.add(component);
        }
    }
}
