package io.orbitkv.server.cli;

import com.fasterxml.jackson.core.JacksonException;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.orbitkv.state.BoundarySelection;
import io.orbitkv.state.Coverage;
import io.orbitkv.state.GroupCoverage;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.PageRange;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.Rejection;
import io.orbitkv.state.Requirement;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.Validation;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * The JSON forms of the state contract ({@code docs/state-contract.md}, "JSON formats"): strict
 * readers for namespace, contract and coverage files, and the writer of a boundary selection.
 *
 * <p>Stateless and thread-safe (the mapper is configured once and only read). Readers accept
 * exactly the documented fields: an unknown, missing, duplicated or mistyped field, a fraction, a
 * negative or misaligned value is an {@link InputException} whose message names the field.
 *
 * <p>Design note: fields are read by hand from the tree rather than bound to classes, because
 * the checks that matter (page alignment, the kind-dependent fields of a group, coverage of the
 * right form for each group) cross fields, and the domain records already validate themselves;
 * binding would add a second set of classes to keep in step with them.
 */
public final class StateJson {

    static final ObjectMapper MAPPER = JsonMapper.builder()
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
            .enable(DeserializationFeature.USE_BIG_INTEGER_FOR_INTS)
            .disable(JsonParser.Feature.ALLOW_COMMENTS)
            .build();

    private static final Set<String> NAMESPACE_FIELDS = Set.of("model_id", "revision", "weights_digest",
            "tokenizer_digest", "adapter_id", "dtype", "kv_layout", "page_tokens", "tp_size", "tp_rank",
            "pp_size", "pp_rank", "format_version");

    private StateJson() {
    }

    /** Parses JSON text; {@code what} names the input in errors. */
    public static JsonNode parse(String json, String what) {
        try {
            JsonNode node = MAPPER.readTree(json);
            if (node == null || node.isMissingNode()) throw new InputException(what + ": empty input");
            return node;
        } catch (JacksonException e) {
            throw new InputException(what + ": malformed JSON: " + e.getOriginalMessage());
        }
    }

    /** A namespace from its 13-field JSON object. */
    public static Namespace namespace(JsonNode node) {
        ObjectNode o = object(node, "namespace");
        exactFields(o, "namespace", NAMESPACE_FIELDS, NAMESPACE_FIELDS);
        try {
            return new Namespace(text(o, "model_id"), text(o, "revision"), text(o, "weights_digest"),
                    text(o, "tokenizer_digest"), text(o, "adapter_id"), text(o, "dtype"), text(o, "kv_layout"),
                    intField(o, "page_tokens", "namespace"), intField(o, "tp_size", "namespace"),
                    intField(o, "tp_rank", "namespace"), intField(o, "pp_size", "namespace"),
                    intField(o, "pp_rank", "namespace"), intField(o, "format_version", "namespace"));
        } catch (IllegalArgumentException e) {
            throw new InputException("namespace: " + e.getMessage());
        }
    }

    /** A contract: {@code {"page_tokens":P,"groups":[{"id":..,"kind":..,...}]}}. */
    public static RecoveryContract contract(JsonNode node) {
        ObjectNode o = object(node, "contract");
        exactFields(o, "contract", Set.of("page_tokens", "groups"), Set.of("page_tokens", "groups"));
        int pageTokens = intField(o, "page_tokens", "contract");
        if (pageTokens <= 0) throw new InputException("contract: page_tokens must be > 0: " + pageTokens);
        JsonNode groupsNode = o.get("groups");
        if (!groupsNode.isArray() || groupsNode.isEmpty()) {
            throw new InputException("contract: groups must be a non-empty array");
        }
        List<StateGroup> groups = new ArrayList<>();
        for (int i = 0; i < groupsNode.size(); i++) groups.add(group(groupsNode.get(i), "contract: groups[" + i + "]"));
        try {
            return new RecoveryContract(pageTokens, groups);
        } catch (IllegalArgumentException e) {
            throw new InputException("contract: " + e.getMessage());
        }
    }

    private static StateGroup group(JsonNode node, String where) {
        ObjectNode o = object(node, where);
        JsonNode kind = o.get("kind");
        if (kind == null || !kind.isTextual()) throw new InputException(where + ": kind must be a string");
        try {
            return switch (kind.asText()) {
                case "full" -> {
                    exactFields(o, where, Set.of("id", "kind"), Set.of("id", "kind"));
                    yield new StateGroup.Full(intField(o, "id", where));
                }
                case "recurrent" -> {
                    exactFields(o, where, Set.of("id", "kind"), Set.of("id", "kind"));
                    yield new StateGroup.Recurrent(intField(o, "id", where));
                }
                case "sliding_window" -> {
                    exactFields(o, where, Set.of("id", "kind", "window"), Set.of("id", "kind", "window", "sink"));
                    int sink = o.has("sink") ? intField(o, "sink", where) : 0;
                    yield new StateGroup.SlidingWindow(intField(o, "id", where), intField(o, "window", where), sink);
                }
                default -> throw new InputException(where + ": unknown group kind \"" + kind.asText()
                        + "\" (expected full, sliding_window or recurrent)");
            };
        } catch (IllegalArgumentException e) {
            throw new InputException(where + ": " + e.getMessage());
        }
    }

    /**
     * Coverage: {@code {"<group id>":{"pages":[[a,b],...]} | {"checkpoints":[t,...]}}}, checked
     * against {@code contract} (known groups, the right form per kind, aligned checkpoints).
     */
    public static Coverage coverage(JsonNode node, RecoveryContract contract) {
        ObjectNode o = object(node, "coverage");
        Map<Integer, GroupCoverage> byGroup = new LinkedHashMap<>();
        for (Map.Entry<String, JsonNode> e : o.properties()) {
            String where = "coverage[\"" + e.getKey() + "\"]";
            if (!e.getKey().matches("0|[1-9][0-9]{0,9}")) {
                throw new InputException(where + ": group id keys must be non-negative decimal integers");
            }
            long id = Long.parseLong(e.getKey());
            if (id > Integer.MAX_VALUE) throw new InputException(where + ": group id too large");
            ObjectNode entry = object(e.getValue(), where);
            if (entry.size() != 1 || !(entry.has("pages") || entry.has("checkpoints"))) {
                throw new InputException(where + ": must have exactly one field, \"pages\" or \"checkpoints\"; has "
                        + fieldNames(entry));
            }
            byGroup.put((int) id, entry.has("pages") ? pages(entry.get("pages"), where + ".pages")
                    : checkpoints(entry.get("checkpoints"), where + ".checkpoints"));
        }
        Coverage coverage = Coverage.of(byGroup);
        if (coverage.validateFor(contract) instanceof Validation.Rejected(String reason)) {
            throw new InputException("coverage: " + reason);
        }
        return coverage;
    }

    private static GroupCoverage pages(JsonNode node, String where) {
        if (!node.isArray()) throw new InputException(where + " must be an array of [start, end) pairs");
        List<PageRange> ranges = new ArrayList<>();
        for (int i = 0; i < node.size(); i++) {
            JsonNode pair = node.get(i);
            if (!pair.isArray() || pair.size() != 2) {
                throw new InputException(where + "[" + i + "] must be a [start, end) pair");
            }
            long start = longValue(pair.get(0), where + "[" + i + "][0]");
            long end = longValue(pair.get(1), where + "[" + i + "][1]");
            if (start < 0 || end <= start) {
                throw new InputException(where + "[" + i + "] must satisfy 0 <= start < end: [" + start + ", " + end + "]");
            }
            ranges.add(new PageRange(start, end));
        }
        return GroupCoverage.pages(ranges);
    }

    private static GroupCoverage checkpoints(JsonNode node, String where) {
        if (!node.isArray()) throw new InputException(where + " must be an array of token positions");
        long[] positions = new long[node.size()];
        for (int i = 0; i < positions.length; i++) {
            positions[i] = longValue(node.get(i), where + "[" + i + "]");
            if (positions[i] <= 0) throw new InputException(where + "[" + i + "] must be > 0: " + positions[i]);
        }
        return GroupCoverage.checkpoints(positions);
    }

    /**
     * The documented selection object: {@code {"boundary":T,"hit":b,"required":{"<id>":[[a,b]],...},
     * "rejected":[{"t":T,"group":G,"reason":"..."}]}}. A recurrent group's requirement is
     * {@code [[t,t]]}: the checkpoint at token {@code t}; page groups list half-open page ranges.
     */
    public static ObjectNode selection(BoundarySelection selection) {
        JsonNodeFactory f = JsonNodeFactory.instance;
        ObjectNode out = f.objectNode();
        out.put("boundary", selection.boundaryTokens());
        out.put("hit", selection.hit());
        ObjectNode required = out.putObject("required");
        for (Requirement r : selection.required()) {
            ArrayNode ranges = required.putArray(Integer.toString(r.groupId()));
            switch (r) {
                case Requirement.Pages p -> p.ranges().forEach(range -> ranges.addArray().add(range.startPage()).add(range.endPage()));
                case Requirement.Checkpoint c -> ranges.addArray().add(c.boundaryTokens()).add(c.boundaryTokens());
            }
        }
        ArrayNode rejected = out.putArray("rejected");
        for (Rejection r : selection.rejected()) {
            rejected.addObject().put("t", r.boundaryTokens()).put("group", r.groupId()).put("reason", r.reason().describe());
        }
        return out;
    }

    static ObjectNode object(JsonNode node, String where) {
        if (!(node instanceof ObjectNode o)) throw new InputException(where + " must be a JSON object");
        return o;
    }

    private static void exactFields(ObjectNode o, String where, Set<String> required, Set<String> allowed) {
        for (Map.Entry<String, JsonNode> e : o.properties()) {
            String name = e.getKey();
            if (!allowed.contains(name)) throw new InputException(where + ": unknown field \"" + name + "\"");
        }
        for (String name : new TreeSet<>(required)) {
            if (!o.has(name)) throw new InputException(where + ": missing field \"" + name + "\"");
        }
    }

    private static String fieldNames(ObjectNode o) {
        List<String> names = new ArrayList<>();
        o.properties().forEach(e -> names.add(e.getKey()));
        return names.toString();
    }

    private static String text(ObjectNode o, String field) {
        JsonNode n = o.get(field);
        if (!n.isTextual()) throw new InputException("namespace: " + field + " must be a string");
        return n.asText();
    }

    static int intField(ObjectNode o, String field, String where) {
        long v = longValue(o.get(field), where + ": " + field);
        if (v < 0) throw new InputException(where + ": " + field + " must not be negative: " + v);
        if (v > Integer.MAX_VALUE) throw new InputException(where + ": " + field + " is too large: " + v);
        return (int) v;
    }

    static long longValue(JsonNode n, String where) {
        if (n == null || !n.isIntegralNumber()) throw new InputException(where + " must be an integer");
        if (!n.canConvertToLong()) throw new InputException(where + " is out of range");
        return n.longValue();
    }
}
