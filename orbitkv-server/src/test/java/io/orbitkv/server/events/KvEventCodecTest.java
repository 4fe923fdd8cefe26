package io.orbitkv.server.events;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessagePack;
import org.msgpack.value.ArrayValue;
import org.msgpack.value.Value;

/** The msgpack layout of {@link KvEventCodec} against the field order of docs/kv-events.md. */
class KvEventCodecTest {

    private static ArrayValue decode(byte[] bytes) throws Exception {
        try (var u = MessagePack.newDefaultUnpacker(bytes)) {
            Value v = u.unpackValue();
            assertThat(u.hasNext()).as("nothing after the batch").isFalse();
            return v.asArrayValue();
        }
    }

    @Test
    void aBatchIsTsThenTaggedArraysInDeclarationOrder() throws Exception {
        byte[] h1 = {1, 2, 3};
        byte[] h2 = {4, 5};
        byte[] bytes = KvEventCodec.encodeBatch(1_700_000_000.25, List.of(
                new KvEvent.AllBlocksCleared(),
                new KvEvent.BlockStored(List.of(h1), null, new int[] {7, 8}, 16, null, "CPU"),
                new KvEvent.BlockStored(List.of(h2), h1, new int[0], 32, 5, "SSD"),
                new KvEvent.BlockRemoved(List.of(h1, h2), "CPU")));

        ArrayValue batch = decode(bytes);
        assertThat(batch.size()).isEqualTo(2);
        assertThat(batch.get(0).isFloatValue()).isTrue();
        assertThat(batch.get(0).asFloatValue().toDouble()).isEqualTo(1_700_000_000.25);
        ArrayValue events = batch.get(1).asArrayValue();
        assertThat(events.size()).isEqualTo(4);

        ArrayValue cleared = events.get(0).asArrayValue();
        assertThat(cleared.size()).isEqualTo(1);
        assertThat(cleared.get(0).asStringValue().asString()).isEqualTo("AllBlocksCleared");

        ArrayValue stored = events.get(1).asArrayValue();
        assertThat(stored.size()).isEqualTo(7);
        assertThat(stored.get(0).asStringValue().asString()).isEqualTo("BlockStored");
        assertThat(stored.get(1).asArrayValue().get(0).asBinaryValue().asByteArray()).isEqualTo(h1);
        assertThat(stored.get(2).isNilValue()).as("parent_block_hash").isTrue();
        assertThat(stored.get(3).asArrayValue().list()).extracting(v -> v.asIntegerValue().asInt()).containsExactly(7, 8);
        assertThat(stored.get(4).asIntegerValue().asInt()).as("block_size").isEqualTo(16);
        assertThat(stored.get(5).isNilValue()).as("lora_id").isTrue();
        assertThat(stored.get(6).asStringValue().asString()).as("medium").isEqualTo("CPU");

        ArrayValue withParent = events.get(2).asArrayValue();
        assertThat(withParent.get(2).asBinaryValue().asByteArray()).isEqualTo(h1);
        assertThat(withParent.get(5).asIntegerValue().asInt()).isEqualTo(5);

        ArrayValue removed = events.get(3).asArrayValue();
        assertThat(removed.size()).isEqualTo(3);
        assertThat(removed.get(0).asStringValue().asString()).isEqualTo("BlockRemoved");
        assertThat(removed.get(1).asArrayValue().list()).extracting(v -> v.asBinaryValue().asByteArray())
                .containsExactly(h1, h2);
        assertThat(removed.get(2).asStringValue().asString()).isEqualTo("CPU");
    }

    @Test
    void eventsTheSchemaCannotExpressAreNotBuilt() {
        assertThatThrownBy(() -> new KvEvent.BlockStored(List.of(), null, new int[0], 16, null, "CPU"))
                .hasMessageContaining("at least one block hash");
        assertThatThrownBy(() -> new KvEvent.BlockStored(List.of(new byte[1]), null, new int[0], 0, null, "CPU"))
                .hasMessageContaining("blockSize");
        assertThatThrownBy(() -> new KvEvent.BlockRemoved(List.of(), "CPU")).hasMessageContaining("at least one");
    }
}
