package io.orbitkv.router.events;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.router.BlockKeys;
import io.orbitkv.router.IndexEvent;
import io.orbitkv.router.Tier;
import java.io.IOException;
import java.util.Arrays;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/** Batches packed field by field as docs/kv-events.md writes them (the Manager's own encoder is checked in orbitkv-server). */
class KvEventDecoderTest {

    interface Body {
        void pack(MessageBufferPacker p) throws IOException;
    }

    static byte[] pack(Body b) throws IOException {
        try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
            b.pack(p);
            return p.toByteArray();
        }
    }

    static void bin(MessageBufferPacker p, byte[] b) throws IOException {
        p.packBinaryHeader(b.length);
        p.writePayload(b);
    }

    @Test
    void decodesTheManagersFullForm() throws IOException {
        byte[] h1 = new byte[32];
        byte[] h2 = new byte[32];
        h2[0] = 7;
        byte[] batch = pack(p -> {
            p.packArrayHeader(2);
            p.packDouble(1764547200.5);
            p.packArrayHeader(3);
            p.packArrayHeader(1).packString("AllBlocksCleared");
            p.packArrayHeader(7).packString("BlockStored");
            p.packArrayHeader(2);
            bin(p, h1);
            bin(p, h2);
            p.packNil().packArrayHeader(0).packInt(16).packNil().packString("CPU");
            p.packArrayHeader(3).packString("BlockRemoved");
            p.packArrayHeader(1);
            bin(p, h2);
            p.packString("SSD");
        });
        KvEventDecoder.Decoded d = (KvEventDecoder.Decoded) KvEventDecoder.decode(batch);
        assertThat(d.timestampSeconds()).isEqualTo(1764547200.5);
        assertThat(d.skippedEvents()).isZero();
        assertThat(d.events()).hasSize(3);
        assertThat(d.events().get(0)).isInstanceOf(IndexEvent.Cleared.class);
        IndexEvent.Stored s = (IndexEvent.Stored) d.events().get(1);
        assertThat(s.tier()).isEqualTo(Tier.DRAM);
        assertThat(s.keys()).containsExactly(BlockKeys.of(h1), BlockKeys.of(h2));
        IndexEvent.Removed r = (IndexEvent.Removed) d.events().get(2);
        assertThat(r.tier()).isEqualTo(Tier.SSD);
        assertThat(r.keys()).containsExactly(BlockKeys.of(h2));
    }

    @Test
    void decodesAnEnginesBatchWithIntegerHashesNoMediumAndExtraFields() throws IOException {
        byte[] batch = pack(p -> {
            p.packArrayHeader(3);                     // with data_parallel_rank
            p.packDouble(1.0);
            p.packArrayHeader(3);
            p.packArrayHeader(6).packString("BlockStored");   // the schema before "medium"
            p.packArrayHeader(2).packLong(-42).packLong(43);
            p.packLong(41).packArrayHeader(2).packInt(1).packInt(2).packInt(16).packInt(3);
            p.packArrayHeader(4).packString("BlockRemoved").packArrayHeader(1).packLong(43).packString("GPU").packInt(9);
            p.packArrayHeader(2).packString("SomeFutureEvent").packInt(1);
            p.packInt(0);
        });
        KvEventDecoder.Decoded d = (KvEventDecoder.Decoded) KvEventDecoder.decode(batch);
        assertThat(d.skippedEvents()).isEqualTo(1);
        IndexEvent.Stored s = (IndexEvent.Stored) d.events().get(0);
        assertThat(s.tier()).isEqualTo(Tier.HBM);
        assertThat(s.keys()).containsExactly(BlockKeys.of(-42), BlockKeys.of(43));
        assertThat(((IndexEvent.Removed) d.events().get(1)).tier()).isEqualTo(Tier.HBM);
    }

    @Test
    void anUnknownMediumSkipsTheEventOnly() throws IOException {
        byte[] batch = pack(p -> {
            p.packArrayHeader(2).packDouble(0).packArrayHeader(1);
            p.packArrayHeader(3).packString("BlockRemoved").packArrayHeader(1).packLong(1).packString("TAPE");
        });
        KvEventDecoder.Decoded d = (KvEventDecoder.Decoded) KvEventDecoder.decode(batch);
        assertThat(d.events()).isEmpty();
        assertThat(d.skippedEvents()).isEqualTo(1);
    }

    @Test
    void malformedBatchesAreRejectedWithAReason() throws IOException {
        assertMalformed(pack(p -> p.packString("hello")), "not an array");
        assertMalformed(pack(p -> p.packArrayHeader(1).packDouble(0)), "fields");
        assertMalformed(pack(p -> p.packArrayHeader(2).packDouble(0).packArrayHeader(1)
                .packArrayHeader(7).packString("BlockStored").packArrayHeader(0)), "empty");
        assertMalformed(pack(p -> p.packArrayHeader(2).packDouble(0).packArrayHeader(1)
                .packArrayHeader(2).packString("BlockRemoved").packArrayHeader(1).packString("x")), "not bin or int");
        assertMalformed(pack(p -> {
            p.packArrayHeader(2).packDouble(0).packArrayHeader(1).packArrayHeader(2).packString("BlockRemoved").packArrayHeader(1);
            bin(p, new byte[65]);
        }), "not 1..64");
        assertMalformed(pack(p -> p.packArrayHeader(2).packDouble(0).packArrayHeader(1_000_000)), "claims 1000000 elements");
        assertMalformed(pack(p -> p.packArrayHeader(2).packDouble(0).packArrayHeader(0).packInt(5)), "after the batch");
        byte[] good = pack(p -> p.packArrayHeader(2).packDouble(0).packArrayHeader(1).packArrayHeader(1).packString("AllBlocksCleared"));
        for (int cut = 0; cut < good.length; cut++) {
            assertThat(KvEventDecoder.decode(Arrays.copyOf(good, cut))).as("cut at %d", cut).isInstanceOf(KvEventDecoder.Malformed.class);
        }
    }

    static void assertMalformed(byte[] batch, String reason) {
        KvEventDecoder.Result r = KvEventDecoder.decode(batch);
        assertThat(r).isInstanceOf(KvEventDecoder.Malformed.class);
        assertThat(((KvEventDecoder.Malformed) r).reason()).contains(reason);
    }
}
