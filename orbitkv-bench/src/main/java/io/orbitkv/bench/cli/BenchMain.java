package io.orbitkv.bench.cli;

import io.orbitkv.bench.manager.ManagerBench;
import io.orbitkv.bench.storage.BenchRow;
import io.orbitkv.bench.storage.CostOverheadBench;
import io.orbitkv.bench.storage.DramPutGetBench;
import io.orbitkv.bench.storage.DramStepProfile;
import io.orbitkv.bench.storage.Fio;
import io.orbitkv.bench.storage.HeapFootprintBench;
import io.orbitkv.bench.storage.SsdThroughputBench;
import io.orbitkv.bench.storage.UringRouteBench;
import io.orbitkv.core.storage.dram.DramEviction;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Entry point of {@code orbitkv-bench.jar}: runs one benchmark, named by the first argument, and
 * prints its Markdown table rows ({@link BenchRow#markdown()}) on standard output; progress and
 * details go to standard error. {@code bin/bench-storage} runs each benchmark in its own JVM and
 * assembles the table; {@code bin/bench-manager} runs {@code manager} (which starts its own Manager
 * process).
 *
 * <pre>
 *   java -jar orbitkv-bench.jar dram      [--shm-dir=/dev/shm/orbitkv-bench] [--sizes-kib=256,2048] [--rounds=21]
 *                                         [--resident-kib=0,131072] [--mib-per-round=512] [--eviction=lru|w-tinylfu]
 *   java -jar orbitkv-bench.jar dram-steps [--shm-dir=...] [--sizes-kib=4,256] [--windows=4,512] [--ops=5000] [--eviction=lru|w-tinylfu]
 *   java -jar orbitkv-bench.jar ssd       [--dir=var/bench] [--sizes-kib=256,2048] [--depths=1,16]
 *                                         [--dataset-mib=1024] [--round-seconds=1] [--rounds=7] [--probe-seconds=1]
 *                                         [--writes=true] [--read-path=auto|positional|uring]
 *   java -jar orbitkv-bench.jar ssd-uring [--dir=var/bench] [--sizes-kib=256,2048] [--depths=1,16]
 *                                         [--dataset-mib=1024] [--round-seconds=1] [--rounds=7]
 *   java -jar orbitkv-bench.jar cost-overhead [--dir=var/bench] [--block-kib=64] [--extents=1024]
 *                                         [--round-seconds=1] [--rounds=10] [--buffered=false]
 *   java -jar orbitkv-bench.jar heap-dram [--shm-dir=...] [--blocks=1000000]
 *   java -jar orbitkv-bench.jar heap-ssd  [--dir=...] [--blocks=1000000]
 *   java -jar orbitkv-bench.jar fio-version
 *   java -jar orbitkv-bench.jar manager   --manager-jar=orbitkv-server/target/orbitkv.jar [--dir=var/bench-manager]
 *                                         [--shm-dir=/dev/shm/orbitkv-bench-manager] [--queries=20000]
 *                                         [--restore-pages=8,32,128] [--rounds=9] [--clients=16] [--ops-per-client=2000]
 * </pre>
 *
 * <p>Single-threaded; exits 0 after printing its rows (whether or not targets were met: the
 * table says so), 2 on bad arguments, 1 when a benchmark failed.
 */
public final class BenchMain {

    private static final Map<String, Set<String>> OPTIONS = Map.of(
            "dram", Set.of("shm-dir", "sizes-kib", "rounds", "resident-kib", "mib-per-round", "eviction"),
            "dram-steps", Set.of("shm-dir", "sizes-kib", "windows", "ops", "eviction"),
            "ssd", Set.of("dir", "sizes-kib", "depths", "dataset-mib", "round-seconds", "rounds", "probe-seconds",
                    "writes", "read-path"),
            "ssd-uring", Set.of("dir", "sizes-kib", "depths", "dataset-mib", "round-seconds", "rounds"),
            "cost-overhead", Set.of("dir", "block-kib", "extents", "round-seconds", "rounds", "buffered"),
            "heap-dram", Set.of("shm-dir", "blocks"),
            "heap-ssd", Set.of("dir", "blocks"),
            "fio-version", Set.of(),
            "manager", Set.of("manager-jar", "dir", "shm-dir", "queries", "restore-pages", "rounds", "clients",
                    "ops-per-client"));

    private BenchMain() {}

    public static void main(String[] args) throws Exception {
        if (args.length == 0 || !OPTIONS.containsKey(args[0])) {
            System.err.println("usage: orbitkv-bench <" + String.join("|", OPTIONS.keySet().stream().sorted().toList())
                    + "> [--option=value ...]");
            System.exit(2);
        }
        String name = args[0];
        Map<String, String> opts = parse(name, Arrays.copyOfRange(args, 1, args.length));
        Path shm = Path.of(opts.getOrDefault("shm-dir", "/dev/shm/orbitkv-bench"));
        Path dir = Path.of(opts.getOrDefault("dir", "var/bench"));
        List<Integer> sizes = ints(opts.getOrDefault("sizes-kib", "256,2048")).stream().map(k -> k * 1024).toList();
        // the DRAM benches measure the Manager's default eviction unless told otherwise
        DramEviction eviction = DramEviction.parse(opts.getOrDefault("eviction", "lru"));
        List<BenchRow> rows = switch (name) {
            case "dram" -> DramPutGetBench.run(new DramPutGetBench.Options(shm, sizes,
                    ints(opts.getOrDefault("resident-kib", "0,131072")).stream().map(k -> k * 1024L).toList(),
                    Integer.parseInt(opts.getOrDefault("rounds", "21")),
                    Long.parseLong(opts.getOrDefault("mib-per-round", "512")) << 20, eviction));
            case "dram-steps" -> DramStepProfile.run(new DramStepProfile.Options(shm,
                    ints(opts.getOrDefault("sizes-kib", "4,256")).stream().map(k -> k * 1024).toList(),
                    ints(opts.getOrDefault("windows", "4,512")),
                    Integer.parseInt(opts.getOrDefault("ops", "5000")), eviction));
            case "ssd" -> SsdThroughputBench.run(new SsdThroughputBench.Options(dir, sizes,
                    ints(opts.getOrDefault("depths", "1,16")),
                    Long.parseLong(opts.getOrDefault("dataset-mib", "1024")) << 20,
                    Integer.parseInt(opts.getOrDefault("round-seconds", "1")),
                    Integer.parseInt(opts.getOrDefault("rounds", "7")),
                    Integer.parseInt(opts.getOrDefault("probe-seconds", "1")),
                    Boolean.parseBoolean(opts.getOrDefault("writes", "true")),
                    io.orbitkv.core.storage.ssd.ReadPath.valueOf(
                            opts.getOrDefault("read-path", "auto").toUpperCase(java.util.Locale.ROOT))));
            case "ssd-uring" -> UringRouteBench.run(new UringRouteBench.Options(dir, sizes,
                    ints(opts.getOrDefault("depths", "1,16")),
                    Long.parseLong(opts.getOrDefault("dataset-mib", "1024")) << 20,
                    Integer.parseInt(opts.getOrDefault("round-seconds", "1")),
                    Integer.parseInt(opts.getOrDefault("rounds", "7"))));
            case "cost-overhead" -> CostOverheadBench.run(new CostOverheadBench.Options(dir,
                    Integer.parseInt(opts.getOrDefault("block-kib", "64")) * 1024,
                    Integer.parseInt(opts.getOrDefault("extents", "1024")),
                    Integer.parseInt(opts.getOrDefault("round-seconds", "1")),
                    Integer.parseInt(opts.getOrDefault("rounds", "10")),
                    Boolean.parseBoolean(opts.getOrDefault("buffered", "false"))));
            case "heap-dram" -> List.of(HeapFootprintBench.dram(shm,
                    Integer.parseInt(opts.getOrDefault("blocks", "1000000"))));
            case "heap-ssd" -> List.of(HeapFootprintBench.ssd(dir,
                    Integer.parseInt(opts.getOrDefault("blocks", "1000000"))));
            case "manager" -> ManagerBench.run(new ManagerBench.Options(
                    Path.of(opts.getOrDefault("manager-jar", "orbitkv-server/target/orbitkv.jar")),
                    Path.of(opts.getOrDefault("dir", "var/bench-manager")),
                    Path.of(opts.getOrDefault("shm-dir", "/dev/shm/orbitkv-bench-manager")),
                    Integer.parseInt(opts.getOrDefault("queries", "20000")),
                    ints(opts.getOrDefault("restore-pages", "8,32,128")),
                    Integer.parseInt(opts.getOrDefault("rounds", "9")),
                    Integer.parseInt(opts.getOrDefault("clients", "16")),
                    Integer.parseInt(opts.getOrDefault("ops-per-client", "2000"))));
            case "fio-version" -> {
                System.out.println(Fio.version());
                yield List.of();
            }
            default -> throw new IllegalStateException("unreachable: " + name);
        };
        for (BenchRow row : rows) System.out.println(row.markdown());
    }

    static Map<String, String> parse(String benchmark, String[] args) {
        Map<String, String> out = new HashMap<>();
        for (String a : args) {
            int eq = a.indexOf('=');
            String key = a.startsWith("--") && eq > 2 ? a.substring(2, eq) : "";
            if (!OPTIONS.get(benchmark).contains(key)) {
                System.err.println(benchmark + ": unknown or malformed option " + a + "; known: " + OPTIONS.get(benchmark));
                System.exit(2);
            }
            out.put(key, a.substring(eq + 1));
        }
        return out;
    }

    static List<Integer> ints(String csv) {
        return Arrays.stream(csv.split(",")).map(String::strip).map(Integer::parseInt).toList();
    }
}
