package io.orbitkv.server.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.PrintWriter;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.time.Instant;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code orbitkv status}: the status page's summary in a terminal, read from a running Manager's
 * {@code /status} (tiers, prefix-cache hit ratio and throughput, sessions and instances, peers and
 * membership, recent errors). {@code --watch} redraws it every {@code --interval} seconds.
 *
 * <p>Exit status: 0 after printing; 1 when the Manager cannot be reached or answers with
 * something other than its status (one line {@code orbitkv: error: ...}); with {@code --watch},
 * an unreachable Manager is shown and retried until interrupted. Runs on the caller's thread.
 */
@Command(name = "status", mixinStandardHelpOptions = true,
        description = "Show a running Manager's status (tiers, hit ratio, sessions, peers, recent errors).")
final class StatusCommand implements Callable<Integer> {

    @Spec
    CommandSpec spec;

    @Option(names = "--url", paramLabel = "URL", defaultValue = "http://127.0.0.1:9464",
            description = "the Manager's HTTP address (its ready line's http=; default ${DEFAULT-VALUE})")
    String url;

    @Option(names = "--watch", description = "redraw every --interval seconds until interrupted")
    boolean watch;

    @Option(names = "--interval", paramLabel = "SECONDS", defaultValue = "2",
            description = "seconds between redraws with --watch (1-3600, default ${DEFAULT-VALUE})")
    int intervalSeconds;

    @Option(names = "--iterations", paramLabel = "N", defaultValue = "0",
            description = "with --watch, stop after N redraws (0 = until interrupted)")
    int iterations;

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Duration TIMEOUT = Duration.ofSeconds(5);

    @Override
    public Integer call() throws InterruptedException {
        if (intervalSeconds < 1 || intervalSeconds > 3600) throw new InputException("--interval must be 1..3600 seconds");
        if (iterations < 0) throw new InputException("--iterations must be >= 0");
        URI status;
        try {
            String base = url.endsWith("/") ? url.substring(0, url.length() - 1) : url;
            if (!base.contains("://")) base = "http://" + base;
            status = URI.create(base + "/status");
            if (status.getHost() == null) throw new IllegalArgumentException("no host");
        } catch (IllegalArgumentException e) {
            throw new InputException("--url '" + url + "' is not an http address: " + e.getMessage());
        }
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        try (HttpClient http = HttpClient.newBuilder().connectTimeout(TIMEOUT).build()) {
            for (int n = 1; ; n++) {
                String text;
                boolean ok;
                try {
                    text = render(fetch(http, status), status.getAuthority());
                    ok = true;
                } catch (IOException e) {
                    text = "cannot read " + status + ": " + (e.getMessage() == null ? e.toString() : e.getMessage())
                            + " (is the Manager running? its ready line names the http address)";
                    ok = false;
                }
                if (!watch) {
                    if (ok) out.print(text);
                    else err.println("orbitkv: error: " + text);
                    out.flush();
                    err.flush();
                    return ok ? 0 : 1;
                }
                // clear the screen and home the cursor, then redraw: a terminal shows one summary
                out.print("\033[H\033[2J");
                out.print(ok ? text : text + "\n");
                out.println("(every " + intervalSeconds + " s; Ctrl-C stops)");
                out.flush();
                if (iterations > 0 && n >= iterations) return 0;
                Thread.sleep(intervalSeconds * 1000L);
            }
        }
    }

    private static JsonNode fetch(HttpClient http, URI uri) throws IOException, InterruptedException {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(uri).timeout(TIMEOUT).build(),
                HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() != 200) throw new IOException("HTTP " + r.statusCode());
        JsonNode node = JSON.readTree(r.body());
        if (node == null || !node.has("dram")) throw new IOException("the answer is not a Manager status");
        return node;
    }

    /** The summary of status {@code s} of the Manager at {@code address}, as printed (lines end in \n). */
    static String render(JsonNode s, String address) {
        StringBuilder b = new StringBuilder(2048);
        JsonNode cluster = s.path("cluster");
        b.append("OrbitKV Manager ").append(address).append("  ")
                .append(s.path("shuttingDown").asBoolean() ? "SHUTTING DOWN" : "serving");
        if (s.has("uptimeSeconds")) b.append("  up ").append(duration((long) s.path("uptimeSeconds").asDouble()));
        if (!cluster.isMissingNode()) {
            b.append("  node ").append(cluster.at("/self/nodeId").asText()).append('#').append(cluster.at("/self/incarnation").asLong());
        }
        b.append('\n').append('\n');

        JsonNode d = s.path("dram");
        long ssdCap = s.path("ssdCapacityBytes").asLong();
        long ssdUsed = s.path("ssdUsedBytes").asLong();
        b.append(String.format(Locale.ROOT, "%-6s %11s %11s %11s %11s %6s%n", "tier", "capacity", "used", "leased", "free", "use"));
        b.append(String.format(Locale.ROOT, "%-6s %11s %11s %11s %11s %6s%n", "DRAM", bytes(d.path("capacityBytes").asLong()),
                bytes(d.path("usedBytes").asLong()), bytes(d.path("leasedBytes").asLong()), bytes(d.path("freeBytes").asLong()),
                percent(d.path("usedBytes").asLong(), d.path("capacityBytes").asLong())));
        b.append(String.format(Locale.ROOT, "%-6s %11s %11s %11s %11s %6s%n", "SSD", bytes(ssdCap), bytes(ssdUsed), "-",
                bytes(ssdCap - ssdUsed), percent(ssdUsed, ssdCap)));
        b.append("staging ").append(bytes(s.path("stagingBytes").asLong())).append(" of ")
                .append(bytes(s.path("stagingBudgetBytes").asLong())).append(" · leases ").append(count(s.path("leases").asLong()))
                .append(" of ").append(count(s.path("maxLeases").asLong())).append('\n').append('\n');

        JsonNode p = s.path("prefixCache");
        b.append("prefix cache: hit ratio ").append(recentRatio(s.path("history"))).append(" (last minute), ")
                .append(lifetimeRatio(p)).append(" since start; queried ").append(count(p.path("queriedTokens").asLong()))
                .append(" tokens; queries hit/miss/pending ").append(count(s.at("/queries/hits").asLong())).append('/')
                .append(count(s.at("/queries/misses").asLong())).append('/').append(count(s.at("/queries/pending").asLong()))
                .append('\n');
        b.append(String.format(Locale.ROOT, "  %-5s %14s %11s %11s%n", "tier", "hit tokens", "hit bytes", "restored"));
        for (String tier : new String[] {"dram", "ssd", "peer"}) {
            b.append(String.format(Locale.ROOT, "  %-5s %14s %11s %11s%n", tier, count(p.path("hitTokens").path(tier).asLong()),
                    bytes(p.path("hitBytes").path(tier).asLong()), bytes(p.path("restoredBytes").path(tier).asLong())));
        }
        b.append("  hit throughput ").append(recentRate(s.path("history"))).append('\n').append('\n');

        b.append("sessions ").append(s.path("sessions").asInt()).append(" of ").append(s.path("maxSessions").asInt())
                .append(" · operations ").append(count(s.path("operations").asLong())).append(" · reservations ")
                .append(count(s.path("reservations").asLong())).append(" · regions ").append(count(s.path("regions").asLong()))
                .append('\n');
        JsonNode instances = s.path("instances");
        if (instances.isEmpty()) b.append("  no engine instance registered\n");
        for (JsonNode i : instances) {
            b.append("  ").append(i.path("instanceId").asText()).append("  epoch ").append(i.path("epoch").asLong())
                    .append(i.path("connected").asBoolean() ? "  connected" : "  disconnected").append('\n');
        }
        b.append('\n');

        if (cluster.isMissingNode()) {
            b.append("cluster: single node\n");
        } else {
            b.append("cluster: membership ").append(cluster.path("valid").asBoolean() ? "valid"
                    : "INVALID (" + cluster.path("invalidReason").asText() + ")").append(", ")
                    .append(cluster.path("live").size()).append(" live\n");
            String self = cluster.at("/self/nodeId").asText();
            for (JsonNode m : cluster.path("live")) {
                b.append("  ").append(m.path("nodeId").asText()).append('#').append(m.path("incarnation").asLong()).append("  ")
                        .append(m.path("endpoint").asText()).append(m.path("nodeId").asText().equals(self) ? "  (this node)" : "")
                        .append('\n');
            }
        }
        JsonNode peer = s.path("peer");
        if (!peer.isMissingNode()) {
            b.append("  peer reads: fetches staged ").append(count(peer.path("fetchesStaged").asLong())).append(", missed ")
                    .append(count(peer.path("fetchesMissed").asLong())).append(", in flight ").append(peer.path("fetchesInFlight").asInt())
                    .append("; tickets ").append(peer.path("tickets").asInt()).append("; remote work ")
                    .append(peer.path("remoteWorkAllowed").asBoolean() ? "allowed" : "STOPPED").append('\n');
        }
        b.append('\n');

        JsonNode errors = s.path("recentErrors");
        long total = errors.path("total").asLong();
        b.append("recent errors: ").append(total == 0 ? "none" : count(total) + " since start, the last ones:").append('\n');
        JsonNode events = errors.path("events");
        for (int i = Math.max(0, events.size() - 10); i < events.size(); i++) {
            JsonNode e = events.get(i);
            b.append("  ").append(Instant.ofEpochMilli(e.path("timeMillis").asLong()).toString(), 0, 19).append("Z ")
                    .append(String.format(Locale.ROOT, "%-5s", e.path("level").asText())).append(' ')
                    .append(e.path("component").asText()).append(": ").append(e.path("message").asText()).append('\n');
        }
        return b.toString();
    }

    private static long hitTokens(JsonNode sample) {
        return sample.path("hitTokensDram").asLong() + sample.path("hitTokensSsd").asLong() + sample.path("hitTokensPeer").asLong();
    }

    /** Hit tokens / queried tokens over the last minute of history samples. */
    static String recentRatio(JsonNode history) {
        JsonNode samples = history.path("samples");
        if (samples.size() < 2) return "- (collecting samples)";
        JsonNode last = samples.get(samples.size() - 1);
        JsonNode first = samples.get(Math.max(0, samples.size() - 1 - perMinute(history)));
        long queried = last.path("queriedTokens").asLong() - first.path("queriedTokens").asLong();
        if (queried <= 0) return "- (no queries)";
        return percent(hitTokens(last) - hitTokens(first), queried);
    }

    private static String recentRate(JsonNode history) {
        JsonNode samples = history.path("samples");
        if (samples.size() < 2) return "- (collecting samples)";
        JsonNode last = samples.get(samples.size() - 1);
        JsonNode first = samples.get(Math.max(0, samples.size() - 1 - perMinute(history)));
        double seconds = Math.max(1, last.path("timeMillis").asLong() - first.path("timeMillis").asLong()) / 1000.0;
        return bytes((long) ((last.path("hitBytes").asLong() - first.path("hitBytes").asLong()) / seconds)) + "/s";
    }

    private static int perMinute(JsonNode history) {
        return (int) Math.max(1, 60_000 / Math.max(1, history.path("periodMillis").asLong(2_000)));
    }

    private static String lifetimeRatio(JsonNode p) {
        long queried = p.path("queriedTokens").asLong();
        long hit = p.path("hitTokens").path("dram").asLong() + p.path("hitTokens").path("ssd").asLong()
                + p.path("hitTokens").path("peer").asLong();
        return queried == 0 ? "-" : percent(hit, queried);
    }

    static String percent(long part, long whole) {
        return whole <= 0 ? "-" : String.format(Locale.ROOT, "%.1f%%", 100.0 * part / whole);
    }

    static String count(long n) {
        return String.format(Locale.ROOT, "%,d", n);
    }

    static String bytes(long n) {
        String[] units = {"B", "KiB", "MiB", "GiB", "TiB"};
        double v = n;
        int i = 0;
        while (Math.abs(v) >= 1024 && i < units.length - 1) {
            v /= 1024;
            i++;
        }
        return i == 0 ? n + " B" : String.format(Locale.ROOT, "%.1f %s", v, units[i]);
    }

    private static String duration(long seconds) {
        if (seconds < 120) return seconds + " s";
        if (seconds < 7_200) return seconds / 60 + " min";
        return seconds / 3_600 + " h " + seconds % 3_600 / 60 + " min";
    }
}
