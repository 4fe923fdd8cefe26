package io.orbitkv.reliability.soak;

import io.orbitkv.reliability.manager.Jcmd;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * One {@code jcmd <pid> GC.class_histogram} of a process: bytes per class of the objects that
 * survived the full collection the command runs first.
 *
 * <p>Design note: the live set excludes {@code jdk.internal.vm.FillerElement} arrays. They are
 * not objects anyone allocated: the collector writes them over dead space it does not compact (a
 * retired buffer's tail) so the heap stays parseable, and the histogram lists them. On the soak's
 * Manager they came and went between samples (about 9 MiB, present or not under the same load),
 * which made the live heap look bimodal; without them the samples are one series.
 *
 * @param bytesByClass bytes per class name, as the histogram names classes (module suffix kept)
 * @param totalBytes the histogram's {@code Total} line
 */
public record ClassHistogram(Map<String, Long> bytesByClass, long totalBytes) {

    static final String FILLER = "jdk.internal.vm.FillerElement";

    public ClassHistogram {
        bytesByClass = Map.copyOf(bytesByClass);
    }

    /** Runs {@code jcmd} of this JVM against {@code pid} and parses its answer. */
    static ClassHistogram of(long pid) throws IOException, InterruptedException {
        return parse(Jcmd.run(pid, "GC.class_histogram"));
    }

    /** Parses the text of {@code GC.class_histogram}: {@code num: instances bytes class [module]} rows and a Total row. */
    static ClassHistogram parse(String out) throws IOException {
        Map<String, Long> bytes = new HashMap<>();
        long total = -1;
        for (String line : out.split("\n")) {
            String[] f = line.trim().split("\\s+");
            if (f.length == 3 && f[0].equals("Total")) {
                total = Long.parseLong(f[2]);
            } else if (f.length >= 4 && f[0].endsWith(":")) {
                bytes.merge(f[3], Long.parseLong(f[2]), Long::sum);
            }
        }
        if (total < 0) throw new IOException("no Total line in jcmd GC.class_histogram: " + out);
        return new ClassHistogram(bytes, total);
    }

    /** Bytes of live objects: the total less the collector's filler arrays. */
    long liveBytes() {
        long filler = 0;
        for (Map.Entry<String, Long> e : bytesByClass.entrySet()) {
            if (e.getKey().contains(FILLER)) filler += e.getValue();
        }
        return totalBytes - filler;
    }

    /** The {@code limit} classes whose bytes grew most from {@code before} to this one, largest first. */
    List<Map.Entry<String, Long>> grownSince(ClassHistogram before, int limit) {
        List<Map.Entry<String, Long>> grown = new ArrayList<>();
        for (Map.Entry<String, Long> e : bytesByClass.entrySet()) {
            if (e.getKey().contains(FILLER)) continue;
            long delta = e.getValue() - before.bytesByClass.getOrDefault(e.getKey(), 0L);
            if (delta > 0) grown.add(Map.entry(e.getKey(), delta));
        }
        grown.sort(Map.Entry.<String, Long>comparingByValue(Comparator.reverseOrder()));
        return grown.subList(0, Math.min(limit, grown.size()));
    }
}
