package io.orbitkv.bench.trace;

import io.orbitkv.bench.BenchManager;
import com.fasterxml.jackson.databind.JsonNode;
import io.orbitkv.state.unix.FileTrees;
import io.orbitkv.testkit.ManagerProcess;
import org.HdrHistogram.Histogram;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.style.markers.SeriesMarkers;

import io.orbitkv.core.storage.dram.DramEviction;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * {@code bin/bench-trace}: replays a Mooncake-format trace against real Manager processes at
 * several capacities (percent of the trace's distinct blocks), next to offline LRU, Belady and
 * chain-aware ({@link ChainAwarePolicy}) simulations at the same capacities, and writes a Markdown table, a CSV, a chart (PNG) and a
 * loss analysis to the results directory; the table also goes to standard output.
 *
 * <pre>
 *   java -cp orbitkv-bench.jar io.orbitkv.bench.trace.TraceBench --trace=FILE [--requests=N] [--skip=M]
 *        [--capacities=5,10,25,50] [--ssd-runs=5+20] [--block-bytes=8192] [--speedup=100] [--concurrency=1]
 *        [--dir=var/bench-trace] [--shm-dir=/dev/shm/orbitkv-bench-trace] [--out=bench-results/trace]
 *        [--evictions=w-tinylfu,lru] [--manager-set=KEY=VALUE] [--tier-policies=lru,chain] [--simulate-only]
 * </pre>
 *
 * <p>Exit status: 0 when every replay restored only right bytes (whether or not the hit-ratio
 * targets were met: the table says so), 1 when a byte was wrong or a run failed, 2 on bad
 * arguments. Single-threaded apart from the replay's workers.
 */
public final class TraceBench {

    static final String USAGE = """
            usage: bench-trace --trace=FILE [options]
              --trace=FILE          Mooncake-format JSONL trace (timestamp ms, input_length, output_length, hash_ids)
              --requests=N          replay only the first N requests (after --skip); default: all
              --skip=M              skip the first M requests; default 0
              --capacities=P,...    DRAM-only runs at these percentages of the trace's distinct blocks; default 5,10,25,50; 'none' for none
              --ssd-runs=D+S,...    DRAM+SSD runs: D % in DRAM plus S % on SSD (policy on-evict); default 5+20; 'none' for none
              --block-bytes=B       bytes per block page, a multiple of 4096; default 8192
              --block-tokens=T      tokens per trace block; default 512
              --speedup=X           replay X times faster than the trace's timestamps; 0 = as fast as possible; default 100
              --concurrency=C       client connections serving requests at once (1..64); default 1 (trace order, as the simulators)
              --dir=DIR             Manager working directories (SSD files, socket, log); default var/bench-trace
              --shm-dir=DIR         tmpfs directory for DRAM arenas and regions; default /dev/shm/orbitkv-bench-trace
              --out=DIR             results directory (table.md, results.csv, hit-ratio.png, losses.md); default bench-results/trace
              --evictions=E,...     run every capacity once per DRAM eviction policy (w-tinylfu, lru); default w-tinylfu,lru
              --manager-set=K=V     extra Manager configuration key for every run (repeatable), e.g. ssdIoThreads=2
              --tier-policies=E,... also replay every DRAM-only capacity in process through the Manager's DRAM
                                    tier under these eviction policies (lru, w-tinylfu, chain); default lru,chain; 'none' for none
              --simulate-only       only the offline simulations (no Manager)
              --help                this text
            """;

    /** One Manager run: DRAM capacity, optional SSD capacity (blocks), the DRAM eviction policy. */
    record RunSpec(String label, double dramPercent, double ssdPercent, long dramBlocks, long ssdBlocks,
                   DramEviction eviction) {
        long totalBlocks() {
            return dramBlocks + ssdBlocks;
        }

        double totalPercent() {
            return dramPercent + ssdPercent;
        }
    }

    /** A run's Manager result with the simulations at its total capacity. */
    record Row(RunSpec spec, TraceReplay.Result replay, long measuredDramPages, long measuredSsdPages, String ssdWritesNotMade,
               PrefixSimulator.Result lru, PrefixSimulator.Result belady, PrefixSimulator.Result caffeine,
               PrefixSimulator.Result oracleLru, PrefixSimulator.Result chainAware) {
        /** Compared in whole tokens (the three served the same prompts), so equal hits are not lost to rounding. */
        boolean targetMet() {
            return replay != null && replay.hitTokens() * 100 >= 95 * belady.hitTokens()
                    && replay.hitTokens() >= lru.hitTokens();
        }
    }

    private TraceBench() {}

    public static void main(String[] args) throws Exception {
        Map<String, List<String>> opts = parse(args);
        if (opts.containsKey("help")) {
            System.out.print(USAGE);
            return;
        }
        try {
            System.exit(run(opts));
        } catch (IllegalArgumentException e) {
            System.err.println("bench-trace: " + e.getMessage());
            System.exit(2);
        } catch (TraceReader.TraceFormatException e) {
            System.err.println("bench-trace: bad trace: " + e.getMessage());
            System.exit(2);
        }
    }

    static int run(Map<String, List<String>> opts) throws Exception {
        Path tracePath = Path.of(required(opts, "trace"));
        long skip = Long.parseLong(one(opts, "skip", "0"));
        int requests = Integer.parseInt(one(opts, "requests", String.valueOf(Integer.MAX_VALUE)));
        int blockBytes = Integer.parseInt(one(opts, "block-bytes", "8192"));
        if (blockBytes < 4096 || blockBytes % 4096 != 0) {
            throw new IllegalArgumentException("--block-bytes must be a positive multiple of 4096: " + blockBytes);
        }
        int blockTokens = Integer.parseInt(one(opts, "block-tokens", "512"));
        double speedup = Double.parseDouble(one(opts, "speedup", "100"));
        int concurrency = Integer.parseInt(one(opts, "concurrency", "1"));
        Path dir = Path.of(one(opts, "dir", "var/bench-trace")).toAbsolutePath();
        Path shm = Path.of(one(opts, "shm-dir", "/dev/shm/orbitkv-bench-trace")).toAbsolutePath();
        Path out = Path.of(one(opts, "out", "bench-results/trace")).toAbsolutePath();
        boolean simulateOnly = opts.containsKey("simulate-only");
        List<String> managerSets = opts.getOrDefault("manager-set", List.of());

        List<TraceRequest> trace = TraceReader.read(tracePath, skip, requests);
        int unique = PrefixSimulator.uniqueBlocks(trace);
        long references = trace.stream().mapToLong(TraceRequest::blocks).sum();
        PrefixSimulator.Result unbounded = PrefixSimulator.run(trace, new LruPolicy(Math.max(1, unique)), blockTokens);
        log(tracePath + ": " + trace.size() + " requests, " + references + " block references, " + unique
                + " distinct blocks; unbounded prefix-hit ratio " + fmt(unbounded.hitRatio(), 4));

        List<DramEviction> evictions = new ArrayList<>();
        for (String e : one(opts, "evictions", "w-tinylfu,lru").split(",")) evictions.add(DramEviction.parse(e));
        List<RunSpec> specs = new ArrayList<>();
        // The simulators do not depend on the Manager's policy: one set of rows without a policy name.
        if (simulateOnly) evictions = List.of(evictions.getFirst());
        for (DramEviction eviction : evictions) {
            String policy = simulateOnly ? "" : " (" + eviction.word() + ")";
            for (String p : one(opts, "capacities", "5,10,25,50").split(",")) {
                if (p.equals("none")) continue;
                double pct = percent(p);
                specs.add(new RunSpec("DRAM " + trim(pct) + " %" + policy, pct, 0, blocksOf(unique, pct), 0, eviction));
            }
            String ssdRuns = one(opts, "ssd-runs", "5+20");
            if (ssdRuns.equals("none")) continue;
            for (String s : ssdRuns.split(",")) {
                String[] parts = s.split("\\+");
                if (parts.length != 2) throw new IllegalArgumentException("--ssd-runs entries are D+S: " + s);
                double d = percent(parts[0]);
                double ssd = percent(parts[1]);
                specs.add(new RunSpec("DRAM " + trim(d) + " % + SSD " + trim(ssd) + " %" + policy, d, ssd,
                        blocksOf(unique, d), blocksOf(unique, ssd), eviction));
            }
        }

        Map<Long, PrefixSimulator.Result[]> sims = new HashMap<>();
        for (RunSpec spec : specs) {
            sims.computeIfAbsent(spec.totalBlocks(), c -> {
                int cap = (int) Math.max(1, c);
                return new PrefixSimulator.Result[] {
                    PrefixSimulator.run(trace, new LruPolicy(cap), blockTokens),
                    PrefixSimulator.run(trace, new BeladyPolicy(cap, trace), blockTokens),
                    PrefixSimulator.run(trace, new CaffeinePolicy(cap), blockTokens),
                    PrefixSimulator.run(trace, LruPolicy.withOracleAdmission(cap, trace), blockTokens),
                    PrefixSimulator.run(trace, new ChainAwarePolicy(cap), blockTokens)};
            });
        }

        List<Row> rows = new ArrayList<>();
        int maxBlocks = trace.stream().mapToInt(TraceRequest::blocks).max().orElseThrow();
        long stagingBytes = Math.max(4L << 20, 2L * concurrency * maxBlocks * blockBytes);
        boolean wrong = false;
        for (RunSpec spec : specs) {
            PrefixSimulator.Result[] s = sims.get(spec.totalBlocks());
            if (simulateOnly) {
                rows.add(new Row(spec, null, 0, 0, "", s[0], s[1], s[2], s[3], s[4]));
                continue;
            }
            Row row = replay(spec, trace, s, blockBytes, blockTokens, speedup, concurrency, stagingBytes, dir, shm,
                    managerSets);
            wrong |= row.replay().wrongBytes() > 0;
            rows.add(row);
        }

        Files.createDirectories(out);
        String command = "bin/bench-trace " + String.join(" ", argsOf(opts));
        String table = table(rows, trace.size(), references, unique, unbounded, tracePath, blockBytes, speedup,
                concurrency, command, simulateOnly)
                + tierTable(rows, trace, blockTokens, one(opts, "tier-policies", "lru,chain"), shm.resolve("tier"));
        Files.writeString(out.resolve("table.md"), table);
        Files.write(out.resolve("results.csv"), csv(rows));
        chart(rows, unbounded, out.resolve("hit-ratio.png"), simulateOnly);
        if (!simulateOnly) Files.writeString(out.resolve("losses.md"), LossAnalysis.report(trace, rows, blockTokens));
        System.out.print(table);
        if (!simulateOnly) System.out.print(Files.readString(out.resolve("losses.md")));
        log("wrote " + out.resolve("table.md") + ", results.csv, hit-ratio.png" + (simulateOnly ? "" : ", losses.md"));
        if (wrong) {
            log("FAILED: restored bytes differed from what was published (see 'wrong bytes')");
            return 1;
        }
        return 0;
    }

    private static Row replay(RunSpec spec, List<TraceRequest> trace, PrefixSimulator.Result[] s, int blockBytes,
                              int blockTokens, double speedup, int concurrency, long stagingBytes, Path dir, Path shm,
                              List<String> managerSets) throws Exception {
        long dramBytes = ManagerCapacity.dramBytesFor(spec.dramBlocks(), blockBytes, stagingBytes);
        List<String> options = new ArrayList<>(List.of("--dram-bytes", String.valueOf(dramBytes),
                "--set", "dramSlotBytes=" + blockBytes, "--set", "stagingBytes=" + stagingBytes, "--set", "ssdFiles=1"));
        if (spec.ssdBlocks() > 0) {
            options.addAll(List.of("--ssd-bytes", String.valueOf(ManagerCapacity.ssdBytesFor(spec.ssdBlocks(), blockBytes)),
                    "--ssd-policy", "on-evict"));
        } else {
            // DRAM only: a small store no page is ever admitted to (a page would need 2^31-1 DRAM hits first).
            options.addAll(List.of("--ssd-bytes", String.valueOf(ManagerCapacity.MIN_SSD_BYTES),
                    "--ssd-policy", "reuse-aware:" + Integer.MAX_VALUE));
        }
        options.addAll(List.of("--set", "dramEviction=" + spec.eviction().word()));
        for (String kv : managerSets) options.addAll(List.of("--set", kv));
        String name = spec.label().toLowerCase(Locale.ROOT).replaceAll("[^a-z0-9]+", "-");
        Path runDir = dir.resolve(name);
        Path runShm = shm.resolve(name);
        FileTrees.delete(runDir.resolve("ssd"));
        log(spec.label() + ": " + spec.dramBlocks() + " DRAM blocks (dram-bytes " + dramBytes + ", index bound "
                + ManagerCapacity.indexPages(dramBytes, blockBytes, stagingBytes) + " pages)"
                + (spec.ssdBlocks() > 0 ? ", " + spec.ssdBlocks() + " SSD blocks" : ""));
        TraceReplay.Result r;
        long dramPages;
        long ssdPages;
        String ssdNotWritten;
        try (ManagerProcess m = BenchManager.start(runDir, runShm, "1g", options)) {
            r = TraceReplay.run(m.socket(), trace, new TraceReplay.Options(blockTokens, blockBytes, speedup, concurrency,
                    runShm.resolve("regions"), Duration.ofSeconds(60)));
            JsonNode status = BenchManager.status(m);
            dramPages = residentPages(status);
            ssdPages = status.path("ssdUsedBytes").asLong(0) / ManagerCapacity.extentBytes(blockBytes);
            String metrics = m.metrics();
            // Evicted pages that never reached the SSD: hand-overs DRAM skipped (evicted-but-leased
            // budget, or a reservation's last eviction), writes the budget skipped, queued writes dropped.
            ssdNotWritten = spec.ssdBlocks() == 0 ? "" : counterSum(metrics, "orbitkv_dram_handovers_skipped_total")
                    + " / " + byReason(metrics, "orbitkv_publish_ssd_skipped_total")
                    + " / " + byReason(metrics, "orbitkv_publish_ssd_dropped_total")
                    + " of " + counterSum(metrics, "orbitkv_dram_evictions_total");
            m.stop();
        } finally {
            FileTrees.delete(runShm);
            FileTrees.delete(runDir.resolve("ssd"));
        }
        log(spec.label() + ": hit " + fmt(r.hitRatio(), 4) + " (DRAM " + fmt(r.dramHitRatio(), 4) + ", SSD "
                + fmt(r.ssdHitRatio(), 4) + "), LRU " + fmt(s[0].hitRatio(), 4) + ", Belady " + fmt(s[1].hitRatio(), 4)
                + "; Manager held " + dramPages + " DRAM pages, " + ssdPages + " SSD extents; " + r.wrongBytes()
                + " wrong bytes; " + fmt(r.achievedRate(), 1) + " req/s in " + fmt(r.wallNanos() / 1e9, 1) + " s");
        return new Row(spec, r, dramPages, ssdPages, ssdNotWritten, s[0], s[1], s[2], s[3], s[4]);
    }

    /**
     * The DRAM-only capacities of {@code rows} replayed in process through the Manager's DRAM tier
     * ({@link TierReplay}) under each policy of {@code policies}, next to the offline LRU and Belady
     * at the same capacity. Empty when {@code policies} is {@code none}.
     */
    static String tierTable(List<Row> rows, List<TraceRequest> trace, int blockTokens, String policies, Path dir)
            throws IOException {
        if (policies.equals("none")) return "";
        List<DramEviction> evictions = new ArrayList<>();
        for (String e : policies.split(",")) evictions.add(DramEviction.parse(e));
        StringBuilder b = new StringBuilder("\nManager DRAM tier in process (`TierReplay`: the real `DramTier` and "
                + "`EvictionPolicy`, chain links as an engine session derives them), DRAM-only capacities:\n\n| blocks |");
        for (DramEviction e : evictions) b.append(" tier ").append(e.word()).append(" |");
        b.append(" LRU (offline) | Belady |");
        for (DramEviction e : evictions) b.append(" tier ").append(e.word()).append(" / Belady |");
        if (evictions.contains(DramEviction.CHAIN) && evictions.contains(DramEviction.LRU)) b.append(" tier chain / tier lru |");
        b.append("\n|").append(" ---: |".repeat(3 + 2 * evictions.size()
                + (evictions.contains(DramEviction.CHAIN) && evictions.contains(DramEviction.LRU) ? 1 : 0))).append('\n');
        Files.createDirectories(dir);
        java.util.Set<Long> done = new java.util.HashSet<>();
        try {
            for (Row row : rows) {
                if (row.spec().ssdBlocks() > 0 || !done.add(row.spec().dramBlocks())) continue;
                int cap = (int) Math.max(1, row.spec().dramBlocks());
                Map<DramEviction, PrefixSimulator.Result> got = new LinkedHashMap<>();
                for (DramEviction e : evictions) got.put(e, TierReplay.run(trace, cap, e, blockTokens, dir));
                double belady = row.belady().hitRatio();
                b.append("| ").append(cap).append(" |");
                for (PrefixSimulator.Result r : got.values()) b.append(' ').append(fmt(r.hitRatio(), 4)).append(" |");
                b.append(' ').append(fmt(row.lru().hitRatio(), 4)).append(" | ").append(fmt(belady, 4)).append(" |");
                for (PrefixSimulator.Result r : got.values()) b.append(' ').append(fmt(r.hitRatio() / belady, 3)).append(" |");
                if (got.containsKey(DramEviction.CHAIN) && got.containsKey(DramEviction.LRU)) {
                    b.append(' ').append(fmt(got.get(DramEviction.CHAIN).hitRatio()
                            / got.get(DramEviction.LRU).hitRatio(), 3)).append(" |");
                }
                b.append('\n');
                log("tier replay at " + cap + " blocks: " + got.values().stream()
                        .map(r -> r.policy() + " " + fmt(r.hitRatio(), 4)).toList());
            }
        } finally {
            FileTrees.delete(dir);
        }
        return b.toString();
    }

    /** The sum over every series of the Prometheus counter {@code name} in a /metrics text. */
    static long counterSum(String metrics, String name) {
        double sum = 0;
        for (String line : metrics.split("\n")) {
            if (!line.startsWith(name)) continue;
            String rest = line.substring(name.length());
            if (!rest.startsWith("{") && !rest.startsWith(" ")) continue;
            sum += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
        }
        return Math.round(sum);
    }

    /** The non-zero series of counter {@code name} by their {@code reason} label, e.g. {@code 12 already_stored}. */
    static String byReason(String metrics, String name) {
        Map<String, Long> out = new java.util.TreeMap<>();
        java.util.regex.Pattern reason = java.util.regex.Pattern.compile("reason=\"([^\"]*)\"");
        for (String line : metrics.split("\n")) {
            if (!line.startsWith(name + "{")) continue;
            java.util.regex.Matcher m = reason.matcher(line);
            long v = Math.round(Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1)));
            if (m.find() && v > 0) out.merge(m.group(1), v, Long::sum);
        }
        if (out.isEmpty()) return "0";
        StringBuilder b = new StringBuilder();
        out.forEach((k, v) -> b.append(b.isEmpty() ? "" : ", ").append(v).append(' ').append(k));
        return b.toString();
    }

    /** Resident DRAM pages in a /status document (the DRAM tier's residentImages). */
    static long residentPages(JsonNode status) {
        JsonNode dram = status.path("dram");
        for (String f : List.of("residentImages", "resident_images")) {
            if (dram.has(f)) return dram.get(f).asLong();
        }
        throw new IllegalStateException("no DRAM resident image count in /status: " + status);
    }

    // ---- output ---------------------------------------------------------------------------------

    static String table(List<Row> rows, int requests, long references, int unique, PrefixSimulator.Result unbounded,
                        Path trace, int blockBytes, double speedup, int concurrency, String command, boolean simOnly) {
        StringBuilder b = new StringBuilder();
        b.append("# Trace replay: prefix-hit ratio vs capacity\n\n");
        b.append("- trace: `").append(trace.getFileName()).append("`, ").append(requests).append(" requests, ")
                .append(references).append(" block references, ").append(unique)
                .append(" distinct blocks; unbounded cache ").append(fmt(unbounded.hitRatio(), 4)).append('\n');
        b.append("- when: ").append(Instant.now().toString(), 0, 16).append(" UTC; ").append(blockBytes)
                .append(" B per block page; speedup ").append(speedup == 0 ? "none (as fast as possible)" : trim(speedup) + "×")
                .append(", concurrency ").append(concurrency).append('\n');
        b.append("- command: `").append(command).append("`\n\n");
        b.append("Prefix-hit ratio = hit tokens / prompt tokens (a request's hit is the longest prefix of its blocks all "
                + "cached; the last block counts its real tokens). Target: OrbitKV ≥ 0.95 × Belady and ≥ LRU.\n\n");
        b.append("| run | blocks | Manager pages held (DRAM / SSD) | OrbitKV | DRAM | SSD | LRU | Belady | OrbitKV / Belady "
                + "| OrbitKV / LRU | target | Caffeine offline | LRU + oracle admission | chain-aware | chain-aware / Belady |\n");
        b.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |\n");
        for (Row r : rows) {
            TraceReplay.Result x = r.replay();
            b.append("| ").append(r.spec().label()).append(" | ").append(r.spec().totalBlocks()).append(" | ")
                    .append(x == null ? "—" : r.measuredDramPages() + " / " + r.measuredSsdPages()).append(" | ")
                    .append(x == null ? "—" : fmt(x.hitRatio(), 4)).append(" | ")
                    .append(x == null ? "—" : fmt(x.dramHitRatio(), 4)).append(" | ")
                    .append(x == null ? "—" : fmt(x.ssdHitRatio(), 4)).append(" | ")
                    .append(fmt(r.lru().hitRatio(), 4)).append(" | ").append(fmt(r.belady().hitRatio(), 4)).append(" | ")
                    .append(x == null ? "—" : fmt(x.hitRatio() / r.belady().hitRatio(), 3)).append(" | ")
                    .append(x == null ? "—" : fmt(x.hitRatio() / r.lru().hitRatio(), 3)).append(" | ")
                    .append(x == null ? "—" : r.targetMet() ? "met" : "missed").append(" | ")
                    .append(fmt(r.caffeine().hitRatio(), 4)).append(" | ").append(fmt(r.oracleLru().hitRatio(), 4))
                    .append(" | ").append(fmt(r.chainAware().hitRatio(), 4)).append(" | ")
                    .append(fmt(r.chainAware().hitRatio() / r.belady().hitRatio(), 3)).append(" |\n");
        }
        if (!simOnly) {
            b.append("\n| run | restored | published | QUERY p50 / p99 | RESTORE p50 / p99 | offered / achieved req/s "
                    + "| start lag p99 | publishes discarded / refused | evictions not copied to SSD: hand-over skipped / "
                    + "write skipped / dropped, of evictions | wrong bytes |\n");
            b.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
            for (Row r : rows) {
                TraceReplay.Result x = r.replay();
                b.append("| ").append(r.spec().label()).append(" | ").append(mib(x.restoredBytes())).append(" | ")
                        .append(mib(x.publishedBytes())).append(" | ").append(micros(x.query())).append(" | ")
                        .append(micros(x.restore())).append(" | ")
                        .append(Double.isInfinite(x.offeredRate()) ? "unpaced" : fmt(x.offeredRate(), 1)).append(" / ")
                        .append(fmt(x.achievedRate(), 1)).append(" | ")
                        .append(fmt(x.startLag().getValueAtPercentile(99) / 1e6, 1)).append(" ms | ")
                        .append(x.publishDiscarded()).append(" / ").append(x.publishRefused()).append(" | ")
                        .append(r.spec().ssdBlocks() == 0 ? "—" : r.ssdWritesNotMade()).append(" | ")
                        .append(x.wrongBytes()).append(" |\n");
            }
        }
        b.append('\n');
        return b.toString();
    }

    static List<String> csv(List<Row> rows) {
        List<String> lines = new ArrayList<>();
        lines.add("run,dram_percent,ssd_percent,blocks,manager_dram_pages,manager_ssd_pages,orbitkv,orbitkv_dram,orbitkv_ssd,"
                + "lru,belady,caffeine_offline,lru_oracle_admission,restored_bytes,published_bytes,query_p50_us,query_p99_us,"
                + "restore_p50_us,restore_p99_us,offered_rps,achieved_rps,wrong_bytes,chain_aware");
        for (Row r : rows) {
            TraceReplay.Result x = r.replay();
            List<String> f = new ArrayList<>(List.of(r.spec().label(), trim(r.spec().dramPercent()),
                    trim(r.spec().ssdPercent()), String.valueOf(r.spec().totalBlocks()),
                    String.valueOf(r.measuredDramPages()), String.valueOf(r.measuredSsdPages())));
            if (x == null) {
                f.addAll(List.of("", "", ""));
            } else {
                f.addAll(List.of(fmt(x.hitRatio(), 5), fmt(x.dramHitRatio(), 5), fmt(x.ssdHitRatio(), 5)));
            }
            f.addAll(List.of(fmt(r.lru().hitRatio(), 5), fmt(r.belady().hitRatio(), 5), fmt(r.caffeine().hitRatio(), 5),
                    fmt(r.oracleLru().hitRatio(), 5)));
            if (x == null) {
                f.addAll(List.of("", "", "", "", "", "", "", "", ""));
            } else {
                f.addAll(List.of(String.valueOf(x.restoredBytes()), String.valueOf(x.publishedBytes()),
                        fmt(x.query().getValueAtPercentile(50) / 1e3, 1), fmt(x.query().getValueAtPercentile(99) / 1e3, 1),
                        fmt(x.restore().getValueAtPercentile(50) / 1e3, 1),
                        fmt(x.restore().getValueAtPercentile(99) / 1e3, 1),
                        Double.isInfinite(x.offeredRate()) ? "" : fmt(x.offeredRate(), 2), fmt(x.achievedRate(), 2),
                        String.valueOf(x.wrongBytes())));
            }
            f.add(fmt(r.chainAware().hitRatio(), 5));
            lines.add(String.join(",", f.stream().map(v -> v.contains(",") ? "\"" + v + "\"" : v).toList()));
        }
        return lines;
    }

    static void chart(List<Row> rows, PrefixSimulator.Result unbounded, Path file, boolean simOnly) throws IOException {
        List<Row> dramOnly = rows.stream().filter(r -> r.spec().ssdBlocks() == 0).toList();
        if (dramOnly.isEmpty()) return;
        // The simulators' series: one point per capacity (the first policy's rows carry them).
        List<Row> sims = dramOnly.stream().filter(r -> r.spec().eviction() == dramOnly.getFirst().spec().eviction()).toList();
        double[] x = sims.stream().mapToDouble(r -> r.spec().dramPercent()).toArray();
        XYChart chart = new XYChartBuilder().width(900).height(560).title("Prefix-hit ratio vs capacity")
                .xAxisTitle("capacity, % of the trace's distinct blocks").yAxisTitle("prefix-hit ratio (tokens)").build();
        chart.getStyler().setLegendPosition(org.knowm.xchart.style.Styler.LegendPosition.OutsideS);
        chart.addSeries("Belady (offline)", x, sims.stream().mapToDouble(r -> r.belady().hitRatio()).toArray());
        chart.addSeries("LRU (offline)", x, sims.stream().mapToDouble(r -> r.lru().hitRatio()).toArray());
        chart.addSeries("Caffeine W-TinyLFU (offline)", x,
                sims.stream().mapToDouble(r -> r.caffeine().hitRatio()).toArray());
        chart.addSeries("Chain-aware (offline)", x, sims.stream().mapToDouble(r -> r.chainAware().hitRatio()).toArray());
        if (!simOnly) {
            for (DramEviction e : dramOnly.stream().map(r -> r.spec().eviction()).distinct().toList()) {
                List<Row> mine = dramOnly.stream().filter(r -> r.spec().eviction() == e).toList();
                chart.addSeries("OrbitKV Manager, " + e.word() + " (replay)",
                        mine.stream().mapToDouble(r -> r.spec().dramPercent()).toArray(),
                        mine.stream().mapToDouble(r -> r.replay().hitRatio()).toArray());
            }
        }
        chart.addSeries("0.95 × Belady", x, sims.stream().mapToDouble(r -> 0.95 * r.belady().hitRatio()).toArray())
                .setMarker(SeriesMarkers.NONE);
        double[] flat = new double[x.length];
        Arrays.fill(flat, unbounded.hitRatio());
        chart.addSeries("unbounded", x, flat).setMarker(SeriesMarkers.NONE);
        String name = file.getFileName().toString();
        BitmapEncoder.saveBitmap(chart, file.resolveSibling(name.substring(0, name.length() - 4)).toString(),
                BitmapEncoder.BitmapFormat.PNG);
    }

    // ---- helpers --------------------------------------------------------------------------------

    static Map<String, List<String>> parse(String[] args) {
        Map<String, List<String>> out = new LinkedHashMap<>();
        List<String> flags = List.of("simulate-only", "help");
        List<String> known = List.of("trace", "requests", "skip", "capacities", "ssd-runs", "block-bytes", "block-tokens",
                "speedup", "concurrency", "dir", "shm-dir", "out", "manager-set", "evictions", "tier-policies", "simulate-only", "help");
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals("-h")) a = "--help";
            if (!a.startsWith("--")) usageError("unexpected argument " + a);
            String key = a.substring(2);
            String value;
            int eq = key.indexOf('=');
            if (eq >= 0) {
                value = key.substring(eq + 1);
                key = key.substring(0, eq);
            } else if (flags.contains(key)) {
                value = "true";
            } else if (i + 1 < args.length) {
                value = args[++i];
            } else {
                usageError("option --" + key + " needs a value");
                return out;
            }
            if (!known.contains(key)) usageError("unknown option --" + key);
            out.computeIfAbsent(key, k -> new ArrayList<>()).add(value);
        }
        return out;
    }

    private static void usageError(String message) {
        System.err.println("bench-trace: " + message + "\n" + USAGE);
        System.exit(2);
    }

    private static List<String> argsOf(Map<String, List<String>> opts) {
        List<String> out = new ArrayList<>();
        opts.forEach((k, vs) -> vs.forEach(v -> out.add(v.equals("true") && List.of("simulate-only").contains(k)
                ? "--" + k : "--" + k + "=" + v)));
        return out;
    }

    private static String required(Map<String, List<String>> opts, String key) {
        List<String> v = opts.get(key);
        if (v == null) throw new IllegalArgumentException("--" + key + " is required (try --help)");
        return v.getLast();
    }

    private static String one(Map<String, List<String>> opts, String key, String def) {
        List<String> v = opts.get(key);
        return v == null ? def : v.getLast();
    }

    private static double percent(String text) {
        double p = Double.parseDouble(text.strip());
        if (!(p > 0 && p <= 100)) throw new IllegalArgumentException("a capacity must be in (0, 100] %: " + text);
        return p;
    }

    static long blocksOf(int unique, double percent) {
        return Math.max(1, Math.round(unique * percent / 100));
    }

    private static String trim(double v) {
        return v == Math.rint(v) ? String.valueOf((long) v) : String.valueOf(v);
    }

    static String fmt(double v, int digits) {
        return String.format(Locale.ROOT, "%." + digits + "f", v);
    }

    private static String mib(long bytes) {
        return fmt(bytes / (double) (1 << 20), 1) + " MiB";
    }

    private static String micros(Histogram h) {
        if (h.getTotalCount() == 0) return "—";
        return fmt(h.getValueAtPercentile(50) / 1e3, 0) + " / " + fmt(h.getValueAtPercentile(99) / 1e3, 0) + " µs";
    }

    private static void log(String line) {
        System.err.println("bench-trace: " + line);
    }
}
