package io.orbitkv.core;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * The build's Java sources as a graph, for the architecture tests: which module declares which
 * package, and which {@code io.orbitkv} packages each file references. References are read from
 * the sources (imports, wildcard imports and fully qualified names, with comments and string
 * literals stripped), so a reference in code counts and a mention in prose does not.
 *
 * <p>Read from the checkout: the modules are those the root {@code pom.xml} lists, the root being
 * the parent of the module whose tests run, so one module's tests check every module. Immutable.
 */
final class SourceTree {

    /** Where a source file lives in its module. */
    enum Kind { MAIN, TEST }

    /** One file: its module, source set, package, name, and the packages it references. */
    record SourceFile(String module, Kind kind, String pkg, String name, Set<String> references) {
    }

    static final Path ROOT = Path.of("..").toAbsolutePath().normalize();

    private static final Pattern MODULE = Pattern.compile("<module>([^<]+)</module>");
    private static final Pattern REFERENCE =
            Pattern.compile("\\b(io\\.orbitkv(?:\\.[a-z_][a-z0-9_]*)+)\\.(?:[A-Z]|\\*)");
    private static final Pattern PACKAGE = Pattern.compile("^package\\s+([\\w.]+);", Pattern.MULTILINE);
    private static final Pattern COMMENTS_AND_STRINGS =
            Pattern.compile("/\\*.*?\\*/|//[^\\n]*|\"(?:\\\\.|[^\"\\\\])*\"|'(?:\\\\.|[^'\\\\])'", Pattern.DOTALL);

    private final List<String> modules;
    private final List<SourceFile> files;
    /** package → the modules whose main sources declare it (more than one: a split package). */
    private final Map<String, Set<String>> declaredBy = new TreeMap<>();

    SourceTree(List<String> modules, List<SourceFile> files) {
        this.modules = List.copyOf(modules);
        this.files = List.copyOf(files);
        for (SourceFile f : files) {
            if (f.kind() == Kind.MAIN) declaredBy.computeIfAbsent(f.pkg(), k -> new TreeSet<>()).add(f.module());
        }
    }

    /** Every module the root pom lists, with its main and test sources. */
    static SourceTree read() throws IOException {
        List<String> modules = new ArrayList<>();
        Matcher m = MODULE.matcher(Files.readString(ROOT.resolve("pom.xml")));
        while (m.find()) modules.add(m.group(1));
        List<SourceFile> files = new ArrayList<>();
        for (String module : modules) {
            for (Kind kind : Kind.values()) {
                Path dir = ROOT.resolve(module).resolve("src").resolve(kind == Kind.MAIN ? "main" : "test").resolve("java");
                if (!Files.isDirectory(dir)) continue;
                try (Stream<Path> walk = Files.walk(dir)) {
                    for (Path file : walk.filter(f -> f.toString().endsWith(".java")).sorted().toList()) {
                        String source = Files.readString(file);
                        Matcher p = PACKAGE.matcher(source);
                        if (p.find()) files.add(new SourceFile(module, kind, p.group(1), file.getFileName().toString(), references(source)));
                    }
                }
            }
        }
        return new SourceTree(modules, files);
    }

    /** The {@code io.orbitkv} packages a source text references in code. */
    static Set<String> references(String source) {
        Set<String> out = new TreeSet<>();
        Matcher m = REFERENCE.matcher(COMMENTS_AND_STRINGS.matcher(source).replaceAll(" "));
        while (m.find()) out.add(m.group(1));
        return out;
    }

    List<String> modules() {
        return modules;
    }

    List<SourceFile> files() {
        return files;
    }

    /** The packages a module's main sources declare. */
    Set<String> packagesOf(String module) {
        Set<String> out = new TreeSet<>();
        declaredBy.forEach((pkg, owners) -> {
            if (owners.contains(module)) out.add(pkg);
        });
        return out;
    }

    /** Packages that more than one module's main sources declare. */
    Map<String, Set<String>> splitPackages() {
        Map<String, Set<String>> out = new TreeMap<>();
        declaredBy.forEach((pkg, owners) -> {
            if (owners.size() > 1) out.put(pkg, owners);
        });
        return out;
    }

    /**
     * The module that owns a referenced package: the one declaring it, or else its longest
     * declared prefix (generated code, such as the server's protobuf packages, has no sources
     * here). Empty for a package no module declares (another project's).
     */
    Optional<String> owner(String pkg) {
        for (String p = pkg; !p.isEmpty(); p = p.contains(".") ? p.substring(0, p.lastIndexOf('.')) : "") {
            Set<String> owners = declaredBy.get(p);
            if (owners != null) return Optional.of(owners.iterator().next());
        }
        return Optional.empty();
    }

    /** A module's main package graph: package → package it references → the files that do. */
    Map<String, Map<String, Set<String>>> packageEdges(String module) {
        Map<String, Map<String, Set<String>>> edges = new TreeMap<>();
        for (SourceFile f : files) {
            if (!f.module().equals(module) || f.kind() != Kind.MAIN) continue;
            Map<String, Set<String>> out = edges.computeIfAbsent(f.pkg(), k -> new TreeMap<>());
            for (String target : f.references()) {
                if (!target.equals(f.pkg()) && owner(target).filter(module::equals).isPresent()) {
                    out.computeIfAbsent(target, k -> new TreeSet<>()).add(f.name());
                }
            }
        }
        return edges;
    }

    /** The cycles of a graph (its strongly connected components of more than one node), explained. */
    static Map<List<String>, String> cycles(Map<String, Map<String, Set<String>>> edges) {
        Map<List<String>, String> out = new HashMap<>();
        for (List<String> cycle : stronglyConnected(edges)) {
            if (cycle.size() < 2) continue;
            StringBuilder why = new StringBuilder("cycle ").append(cycle).append(':');
            for (String from : cycle) {
                for (String to : cycle) {
                    Set<String> where = edges.getOrDefault(from, Map.of()).get(to);
                    if (where != null) why.append("\n  ").append(from).append(" -> ").append(to).append(" in ").append(where);
                }
            }
            out.put(cycle, why.toString());
        }
        return out;
    }

    /** Tarjan's strongly connected components (recursive: these graphs are a few dozen nodes deep at most). */
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
