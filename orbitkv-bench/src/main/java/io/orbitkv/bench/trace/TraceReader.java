package io.orbitkv.bench.trace;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Reads request traces in the Mooncake FAST'25 JSONL format: one JSON object per line with
 * {@code timestamp} (ms), {@code input_length}, {@code output_length} and {@code hash_ids} (the
 * prompt's 512-token blocks). Any file of that format is accepted; other fields are ignored,
 * blank lines are skipped. A malformed line fails the whole read with {@link TraceFormatException}
 * naming the file and line, so a replay never runs on a silently truncated trace.
 *
 * <p>Bounds: at most {@link #MAX_BLOCKS_PER_REQUEST} blocks per request (a QUERY carries at most
 * 65,536 pages, protocol.md section 8) and {@code maxRequests} requests per read; the whole
 * selection is held in memory (the shipped trace: 12,031 requests, about 3 MB of heap).
 * Stateless and thread-safe.
 */
public final class TraceReader {

    /** Most blocks of one request: the protocol's default {@code maxPagesPerQuery}. */
    public static final int MAX_BLOCKS_PER_REQUEST = 65_536;

    private static final ObjectMapper JSON = new ObjectMapper();

    /** A trace line that is not a valid request; the message names the source and line. */
    public static final class TraceFormatException extends IOException {
        private static final long serialVersionUID = 1L;

        TraceFormatException(String message) {
            super(message);
        }
    }

    private TraceReader() {}

    /** Reads every request of {@code file} (at most {@code maxRequests}, after skipping {@code skip}). */
    public static List<TraceRequest> read(Path file, long skip, int maxRequests) throws IOException {
        try (BufferedReader in = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            return read(in, file.toString(), skip, maxRequests);
        }
    }

    /**
     * Reads requests from {@code in}: skips the first {@code skip} requests, then returns at most
     * {@code maxRequests}. Every line read is validated, skipped ones too.
     */
    public static List<TraceRequest> read(Reader in, String source, long skip, int maxRequests) throws IOException {
        if (skip < 0) throw new IllegalArgumentException("skip must be >= 0: " + skip);
        if (maxRequests < 1) throw new IllegalArgumentException("maxRequests must be >= 1: " + maxRequests);
        BufferedReader lines = in instanceof BufferedReader b ? b : new BufferedReader(in);
        List<TraceRequest> out = new ArrayList<>();
        long lineNo = 0;
        long seen = 0;
        for (String text; (text = lines.readLine()) != null && out.size() < maxRequests; ) {
            lineNo++;
            if (text.isBlank()) continue;
            TraceRequest r = parse(text, source, lineNo);
            if (seen++ >= skip) out.add(r);
        }
        if (out.isEmpty()) {
            throw new TraceFormatException(source + ": no requests" + (skip > 0 ? " after skipping " + skip : ""));
        }
        return out;
    }

    /** Parses one line; {@code lineNo} is 1-based. */
    static TraceRequest parse(String text, String source, long lineNo) throws TraceFormatException {
        String where = source + ":" + lineNo + ": ";
        JsonNode node;
        try {
            node = JSON.readTree(text);
        } catch (JsonProcessingException e) {
            throw new TraceFormatException(where + "not valid JSON (" + e.getOriginalMessage() + ")");
        }
        if (node == null || !node.isObject()) throw new TraceFormatException(where + "expected one JSON object");
        long timestamp = integer(node, "timestamp", 0, where);
        long input = integer(node, "input_length", 1, where);
        long output = integer(node, "output_length", 0, where);
        JsonNode ids = node.get("hash_ids");
        if (ids == null || !ids.isArray()) throw new TraceFormatException(where + "missing array field \"hash_ids\"");
        if (ids.isEmpty()) throw new TraceFormatException(where + "\"hash_ids\" is empty");
        if (ids.size() > MAX_BLOCKS_PER_REQUEST) {
            throw new TraceFormatException(where + "\"hash_ids\" has " + ids.size() + " blocks, more than "
                    + MAX_BLOCKS_PER_REQUEST);
        }
        long[] hashIds = new long[ids.size()];
        for (int i = 0; i < hashIds.length; i++) {
            JsonNode id = ids.get(i);
            if (!id.isIntegralNumber() || !id.canConvertToLong() || id.longValue() < 0) {
                throw new TraceFormatException(where + "hash_ids[" + i + "] must be a non-negative integer: " + id);
            }
            hashIds[i] = id.longValue();
        }
        return new TraceRequest(lineNo, timestamp, input, output, hashIds);
    }

    private static long integer(JsonNode node, String field, long min, String where) throws TraceFormatException {
        JsonNode v = node.get(field);
        if (v == null) throw new TraceFormatException(where + "missing field \"" + field + "\"");
        if (!v.isIntegralNumber() || !v.canConvertToLong()) {
            throw new TraceFormatException(where + "\"" + field + "\" must be an integer: " + v);
        }
        if (v.longValue() < min) {
            throw new TraceFormatException(where + "\"" + field + "\" must be >= " + min + ": " + v.longValue());
        }
        return v.longValue();
    }
}
