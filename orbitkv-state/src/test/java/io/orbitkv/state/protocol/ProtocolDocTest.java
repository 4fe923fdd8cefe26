package io.orbitkv.state.protocol;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.lang.reflect.RecordComponent;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/**
 * Ties {@code docs/protocol.md} to the code: every marked table lists exactly the enum's
 * constants with their codes (in declaration order), the limits table lists ProtocolLimits'
 * components with their defaults in wire order, and each worked example is the encoder's output.
 */
class ProtocolDocTest {

    private static final List<String> DOC = readDoc();

    private static List<String> readDoc() {
        Path dir = Path.of("").toAbsolutePath();
        while (dir != null && !Files.exists(dir.resolve("docs/protocol.md"))) dir = dir.getParent();
        assertThat(dir).as("docs/protocol.md above the working directory").isNotNull();
        try {
            return Files.readAllLines(dir.resolve("docs/protocol.md"));
        } catch (IOException e) {
            throw new AssertionError(e);
        }
    }

    /** Data rows (cells trimmed) of the table after {@code <!-- table: name -->}. */
    static List<List<String>> table(String name) {
        int at = DOC.indexOf("<!-- table: " + name + " -->");
        assertThat(at).as("table marker for " + name).isNotNegative();
        List<List<String>> rows = new ArrayList<>();
        int i = at + 1;
        while (i < DOC.size() && DOC.get(i).isBlank()) i++;
        for (i += 2; i < DOC.size() && DOC.get(i).startsWith("|"); i++) {
            String line = DOC.get(i).trim();
            rows.add(Arrays.stream(line.substring(1, line.length() - 1).split("\\|")).map(String::trim).toList());
        }
        return rows;
    }

    private static <E extends Enum<E> & WireCode> void assertEnumTable(Class<E> type, Function<String, Integer> parseCode) {
        List<String> documented = table(type.getSimpleName()).stream()
                .map(row -> parseCode.apply(row.get(0)) + " " + row.get(1)).toList();
        List<String> code = Arrays.stream(type.getEnumConstants()).map(e -> e.code() + " " + e.name()).toList();
        assertThat(documented).as(type.getSimpleName() + " table in docs/protocol.md").isEqualTo(code);
    }

    @Test
    void frameTypeTableMatchesTheEnumAndDirections() {
        assertEnumTable(FrameType.class, Integer::decode);
        for (List<String> row : table("FrameType")) {
            FrameType type = FrameType.valueOf(row.get(1));
            assertThat(row.get(2)).as(type + " sender")
                    .isEqualTo(type.direction() == Direction.TO_MANAGER ? "client" : "Manager");
        }
    }

    @Test
    void errorCodeTableMatchesTheEnumAndItsClosingRule() {
        assertEnumTable(ErrorCode.class, Integer::valueOf);
        for (List<String> row : table("ErrorCode")) {
            ErrorCode code = ErrorCode.valueOf(row.get(1));
            assertThat(row.get(2).startsWith("yes")).as(code + " closes").isEqualTo(code.closesConnection());
        }
    }

    @Test
    void fieldEnumTablesMatchTheEnums() {
        assertEnumTable(KeyForm.class, Integer::valueOf);
        assertEnumTable(CompletionTarget.class, Integer::valueOf);
        assertEnumTable(QueryStatus.class, Integer::valueOf);
        assertEnumTable(PageState.class, Integer::valueOf);
        assertEnumTable(Refusal.class, Integer::valueOf);
        assertEnumTable(SettleOutcome.class, Integer::valueOf);
        assertEnumTable(CompletionEvent.class, Integer::valueOf);
        assertEnumTable(Reply.PrepareOutcome.class, Integer::valueOf);
        assertEnumTable(HintKind.class, Integer::valueOf);
        assertEnumTable(PageLocation.class, Integer::valueOf);
    }

    @Test
    void limitsTableListsEveryLimitWithItsDefaultInWireOrder() {
        List<String> documented = table("ProtocolLimits").stream().map(row -> row.get(1) + "=" + row.get(2)).toList();
        RecordComponent[] components = ProtocolLimits.class.getRecordComponents();
        int[] defaults = ProtocolLimits.DEFAULTS.toArray();
        List<String> code = new ArrayList<>();
        for (int i = 0; i < components.length; i++) code.add(components[i].getName() + "=" + defaults[i]);
        assertThat(documented).isEqualTo(code);
        assertThat(code).hasSize(ProtocolLimits.FIELDS);
    }

    @Test
    void workedExamplesAreTheEncodersBytes() {
        assertThat(example("QUERY_POLL")).isEqualTo(hex(FrameEncoder.toBytes(7, new Request.QueryPoll(3, 1))));
        byte[] hashes = new byte[16];
        Arrays.fill(hashes, 0, 8, (byte) 1);
        Arrays.fill(hashes, 8, 16, (byte) 2);
        Request.Query query = new Request.Query(3, 2, CompletionTarget.HOST_READY, 100, 0, 2000,
                List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.packed(8, hashes))));
        assertThat(example("QUERY")).isEqualTo(hex(FrameEncoder.toBytes(9, query)));
        Request.Hint hint = new Request.Hint(HintKind.PIN, 30_000, query.groups());
        assertThat(example("HINT")).isEqualTo(hex(FrameEncoder.toBytes(5, hint)));
        assertThat(example("HINTED")).isEqualTo(hex(FrameEncoder.toBytes(5, new Reply.Hinted(HintKind.PIN, 2, 0, 0))));
        assertThat(example("CONTAINS")).isEqualTo(hex(FrameEncoder.toBytes(5, new Request.Contains(query.groups()))));
        assertThat(example("CONTAINED")).isEqualTo(hex(FrameEncoder.toBytes(5,
                new Reply.Contained(false, List.of(PageLocation.DRAM, PageLocation.ABSENT)))));
        assertThat(example("ERROR"))
                .isEqualTo(hex(FrameEncoder.toBytes(9, new Reply.Error(ErrorCode.NOT_FOUND, "no such operation"))));
        byte[] t = new byte[DescriptorTicket.BYTES];
        byte[] h = new byte[DescriptorTicket.BYTES];
        for (int i = 0; i < t.length; i++) {
            t[i] = (byte) (0x10 + i);
            h[i] = (byte) (0xa0 + i);
        }
        DescriptorTicket ticket = DescriptorTicket.of(t);
        Reply.Registered registered = new Reply.Registered(1, 1, ProtocolLimits.DEFAULTS, ticket, "/run/okv/m.sock.fd",
                List.of(new Reply.ArenaFile(4096 + 16 * 65536L, 65536)));
        assertThat(example("REGISTERED")).isEqualTo(hex(FrameEncoder.toBytes(1, registered)));
        assertThat(new FrameDecoder(ProtocolLimits.DEFAULTS, Direction.TO_CLIENT)
                .decode(ByteBuffer.wrap(HexFormat.of().parseHex(example("REGISTERED")))))
                .isEqualTo(new DecodeResult.Decoded(1, registered, 136));
        Request.RegisterRegion region = new Request.RegisterRegion(new Request.FromDescriptor(DescriptorTicket.of(h)),
                65536, 16384, 4);
        assertThat(example("REGISTER_REGION")).isEqualTo(hex(FrameEncoder.toBytes(2, region)));
        assertThat(example("DESCRIPTOR_ARENAS")).isEqualTo(hex(DescriptorExchange.arenasRequest(ticket)));
        assertThat(example("DESCRIPTOR_ARENAS_OK")).isEqualTo(hex(DescriptorExchange.okReply(1, java.util.Optional.empty())));
        assertThat(example("DESCRIPTOR_REFUSED")).isEqualTo(hex(DescriptorExchange.errorReply(ErrorCode.TICKET_REFUSED)));
        assertThat(example("DESCRIPTOR_REGION")).isEqualTo(hex(DescriptorExchange.regionRequest()));
        // And the documented bytes decode back to the value.
        DecodeResult decoded = new FrameDecoder(ProtocolLimits.DEFAULTS, Direction.TO_MANAGER)
                .decode(ByteBuffer.wrap(HexFormat.of().parseHex(example("QUERY"))));
        assertThat(decoded).isEqualTo(new DecodeResult.Decoded(9, query, 84));
    }

    private static String example(String name) {
        int at = DOC.indexOf("<!-- example: " + name + " -->");
        assertThat(at).as("example marker for " + name).isNotNegative();
        StringBuilder hex = new StringBuilder();
        int i = at + 1;
        while (!DOC.get(i).startsWith("```hex")) i++;
        for (i++; !DOC.get(i).startsWith("```"); i++) hex.append(DOC.get(i).replaceAll("\\s", ""));
        return hex.toString().toLowerCase(Locale.ROOT);
    }

    private static String hex(byte[] bytes) {
        return HexFormat.of().formatHex(bytes);
    }
}
