package io.orbitkv.state;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.HexFormat;
import org.junit.jupiter.api.Test;

class NamespaceTest {

    static Namespace sample() {
        return new Namespace("m", "r1", "w", "t", "", "bf16", "nhd", 16, 1, 0, 1, 0, 1);
    }

    @Test
    void canonicalBytesFollowTheDocumentedLayout() {
        byte[] b = sample().canonicalBytes();
        String hex = HexFormat.of().formatHex(b);
        assertThat(hex).isEqualTo(
                "4f4b4e53" + "01000000"               // magic, version 1
                + "01000000" + "6d"                   // "m"
                + "02000000" + "7231"                 // "r1"
                + "01000000" + "77"                   // "w"
                + "01000000" + "74"                   // "t"
                + "00000000"                          // ""
                + "04000000" + "62663136"             // "bf16"
                + "03000000" + "6e6864"               // "nhd"
                + "10000000" + "01000000" + "00000000" + "01000000" + "00000000" + "01000000");
    }

    @Test
    void theBuilderSetsFieldsByNameWithSingleRankDefaultsAndNamesAMissingField() {
        assertThat(Namespace.builder().model("m", "r1").digests("w", "t").dtype("bf16").kvLayout("nhd").pageTokens(16)
                .build()).isEqualTo(sample());
        assertThat(Namespace.builder().model("模型/ü", "rev").digests("ab", "cd").adapterId("lora-7").dtype("fp8_e4m3")
                .kvLayout("hnd").pageTokens(64).tensorParallel(8, 7).pipelineParallel(2, 1).formatVersion(3).build())
                .isEqualTo(new Namespace("模型/ü", "rev", "ab", "cd", "lora-7", "fp8_e4m3", "hnd", 64, 8, 7, 2, 1, 3));
        assertThatThrownBy(() -> Namespace.builder().model("m", "r1").dtype("bf16").kvLayout("nhd").pageTokens(16).build())
                .isInstanceOf(IllegalArgumentException.class).hasMessage("weights_digest is not set");
        assertThatThrownBy(() -> Namespace.builder().model("m", "r1").digests("w", "t").dtype("bf16").kvLayout("nhd").build())
                .isInstanceOf(IllegalArgumentException.class).hasMessage("page_tokens is not set");
        assertThatThrownBy(() -> Namespace.builder().model("m", "r1").digests("w", "t").dtype("bf16").kvLayout("nhd")
                .pageTokens(16).tensorParallel(2, 2).build()).hasMessageContaining("tp_rank must be in [0, tp_size)");
    }

    @Test
    void digestIsSha256OfTheCanonicalBytes() throws Exception {
        Namespace ns = sample();
        byte[] expected = java.security.MessageDigest.getInstance("SHA-256").digest(ns.canonicalBytes());
        assertThat(ns.digest()).isEqualTo(expected);
        assertThat(ns.digestHex()).isEqualTo(HexFormat.of().formatHex(expected));
    }

    @Test
    void decodesWhatItEncodes() {
        Namespace ns = new Namespace("模型/ü", "rev", "ab", "cd", "lora-7", "fp8_e4m3", "hnd", 64, 8, 7, 2, 1, 3);
        assertThat(Namespace.decode(ns.canonicalBytes())).isEqualTo(new NamespaceDecoding.Decoded(ns));
    }

    @Test
    void rejectsInvalidFields() {
        assertThatThrownBy(() -> new Namespace("", "r", "w", "t", "", "bf16", "nhd", 16, 1, 0, 1, 0, 1))
                .hasMessageContaining("model_id");
        assertThatThrownBy(() -> new Namespace("m", "r", "w", "t", "", "bf16", "nhd", 0, 1, 0, 1, 0, 1))
                .hasMessageContaining("page_tokens");
        assertThatThrownBy(() -> new Namespace("m", "r", "w", "t", "", "bf16", "nhd", 16, 2, 2, 1, 0, 1))
                .hasMessageContaining("tp_rank");
        assertThatThrownBy(() -> new Namespace("m", "r", "w", "t", "", "bf16", "nhd", 16, 1, 0, 1, -1, 1))
                .hasMessageContaining("pp_rank");
        assertThatThrownBy(() -> new Namespace("m", "r", "w", "t", "", "bf16", "nhd", 16, 1, 0, 0, 0, 1))
                .hasMessageContaining("pp_size");
        assertThatThrownBy(() -> new Namespace("m", "r", "w", "t", "", "bf16", "nhd", 16, 1, 0, 1, 0, 0))
                .hasMessageContaining("format_version");
        assertThatThrownBy(() -> new Namespace("m\uD800", "r", "w", "t", "", "bf16", "nhd", 16, 1, 0, 1, 0, 1))
                .hasMessageContaining("well-formed");
        assertThatThrownBy(() -> new Namespace("x".repeat(1025), "r", "w", "t", "", "bf16", "nhd", 16, 1, 0, 1, 0, 1))
                .hasMessageContaining("1024");
    }

    @Test
    void malformedEncodingsAreValuesWithAReason() {
        byte[] good = sample().canonicalBytes();
        assertMalformed(new byte[0], "truncated header");
        byte[] badMagic = good.clone();
        badMagic[0] = 'X';
        assertMalformed(badMagic, "bad magic");
        byte[] badVersion = good.clone();
        badVersion[4] = 2;
        assertMalformed(badVersion, "unsupported encoding version 2");
        assertMalformed(Arrays.copyOf(good, good.length - 1), "expected 24 bytes");
        assertMalformed(Arrays.copyOf(good, good.length + 1), "expected 24 bytes");
        assertMalformed(Arrays.copyOf(good, 10), "truncated length of model_id");
        assertMalformed(Arrays.copyOf(good, 15), "truncated length of revision at offset 13");
        assertMalformed(Arrays.copyOf(good, 18), "truncated revision at offset 17");
        byte[] hugeLength = good.clone();
        ByteBuffer.wrap(hugeLength).order(ByteOrder.LITTLE_ENDIAN).putInt(8, 0x7fff_ffff);
        assertMalformed(hugeLength, "exceeds 1024");
        byte[] badUtf8 = good.clone();
        badUtf8[12] = (byte) 0xff; // the "m" of model_id
        assertMalformed(badUtf8, "not valid UTF-8");
        byte[] emptyModel = new Namespace("m", "r1", "w", "t", "", "bf16", "nhd", 16, 1, 0, 1, 0, 1).canonicalBytes();
        byte[] zeroPage = emptyModel.clone();
        ByteBuffer.wrap(zeroPage).order(ByteOrder.LITTLE_ENDIAN).putInt(zeroPage.length - 24, 0);
        assertMalformed(zeroPage, "page_tokens");
        assertMalformed(new byte[Namespace.MAX_ENCODED_BYTES + 1], "more than");
    }

    private static void assertMalformed(byte[] bytes, String reasonPart) {
        NamespaceDecoding d = Namespace.decode(bytes);
        assertThat(d).isInstanceOf(NamespaceDecoding.Malformed.class);
        assertThat(((NamespaceDecoding.Malformed) d).reason()).contains(reasonPart);
    }
}
