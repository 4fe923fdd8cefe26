package io.orbitkv.core;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.core.SourceTree.Kind;
import io.orbitkv.core.SourceTree.SourceFile;
import java.io.IOException;
import java.nio.file.Files;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The modules with a {@code module-info.java} ({@code orbitkv-state}, {@code orbitkv-core}) are
 * used only through what they export. The JVM enforces exports between named modules only, and
 * the rest of the build runs on the class path, so this test enforces them there: no main or test
 * source of another module references (imports, or names fully qualified) a package that the
 * owning module declares but does not export.
 */
class ModuleFaceTest {

    private static final List<String> NAMED_MODULES = List.of("orbitkv-state", "orbitkv-core");
    private static final Pattern COMMENTS = Pattern.compile("/\\*.*?\\*/|//[^\\n]*", Pattern.DOTALL);
    private static final Pattern EXPORTS = Pattern.compile("\\bexports\\s+([\\w.]+)\\s*;");

    @Test
    void otherModulesUseOnlyExportedPackages() throws IOException {
        SourceTree tree = SourceTree.read();
        Map<String, Set<String>> exports = new TreeMap<>();
        for (String module : NAMED_MODULES) {
            exports.put(module, exports(Files.readString(SourceTree.ROOT.resolve(module).resolve("src/main/java/module-info.java"))));
        }
        assertThat(exports.get("orbitkv-core")).as("core's exports").contains("io.orbitkv.core.engine", "io.orbitkv.core.log");
        assertThat(internalUses(tree, exports)).isEmpty();
    }

    @Test
    void aReferenceToAnUnexportedPackageIsFound() {
        SourceTree tree = new SourceTree(List.of("lib", "app"), List.of(
                new SourceFile("lib", Kind.MAIN, "io.orbitkv.lib", "Api.java", Set.of("io.orbitkv.lib.internal")),
                new SourceFile("lib", Kind.MAIN, "io.orbitkv.lib.internal", "Impl.java", Set.of()),
                new SourceFile("lib", Kind.TEST, "io.orbitkv.lib", "ApiTest.java", Set.of("io.orbitkv.lib.internal")),
                new SourceFile("app", Kind.MAIN, "io.orbitkv.app", "App.java", Set.of("io.orbitkv.lib", "io.orbitkv.lib.internal")),
                new SourceFile("app", Kind.TEST, "io.orbitkv.app", "AppTest.java", Set.of("io.orbitkv.lib.internal"))));
        Set<String> exports = exports("""
                /** exports io.orbitkv.lib.internal; in prose only */
                module io.orbitkv.lib {
                    requires transitive io.orbitkv.other;
                    exports io.orbitkv.lib;
                    // exports io.orbitkv.lib.internal;
                }""");
        assertThat(exports).containsExactly("io.orbitkv.lib");
        assertThat(internalUses(tree, Map.of("lib", exports))).containsExactly(
                "app (MAIN) App.java uses io.orbitkv.lib.internal, which lib does not export",
                "app (TEST) AppTest.java uses io.orbitkv.lib.internal, which lib does not export");
    }

    /** The unqualified exports of a module declaration (a qualified one names a module, which the class path has not). */
    static Set<String> exports(String moduleInfo) {
        Set<String> out = new TreeSet<>();
        Matcher m = EXPORTS.matcher(COMMENTS.matcher(moduleInfo).replaceAll(" "));
        while (m.find()) out.add(m.group(1));
        return out;
    }

    /** Each reference from another module's source to a declared, unexported package of a named module. */
    static List<String> internalUses(SourceTree tree, Map<String, Set<String>> exportsByModule) {
        Set<String> out = new TreeSet<>();
        exportsByModule.forEach((module, exports) -> {
            Set<String> internal = new TreeSet<>(tree.packagesOf(module));
            internal.removeAll(exports);
            for (SourceFile f : tree.files()) {
                if (f.module().equals(module)) continue;
                for (String target : f.references()) {
                    if (internal.contains(target)) {
                        out.add(f.module() + " (" + f.kind() + ") " + f.name() + " uses " + target + ", which " + module + " does not export");
                    }
                }
            }
        });
        return List.copyOf(out);
    }
}
