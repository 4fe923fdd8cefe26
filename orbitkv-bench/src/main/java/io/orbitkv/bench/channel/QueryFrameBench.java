package io.orbitkv.bench.channel;

import io.orbitkv.state.TokenChain;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.DecodeResult;
import io.orbitkv.state.protocol.Direction;
import io.orbitkv.state.protocol.FrameDecoder;
import io.orbitkv.state.protocol.FrameEncoder;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.ProtocolLimits;
import io.orbitkv.state.protocol.Request;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * JMH microbenchmark of the CPU a QUERY costs on either side of the socket, without the socket:
 * the engine naming a prompt's pages with the project's token chain
 * ({@link TokenChain#pageHashes}: one SHA-256 per page over the previous hash and the page's
 * tokens), the engine encoding the QUERY frame ({@link FrameEncoder}), and the Manager decoding
 * it ({@link FrameDecoder}, every count checked against its limit and the bytes present before
 * anything is allocated). {@code bin/bench-manager} measures the same QUERY end to end against a
 * raw socket echo; this says how much of that round trip is codec and hashing.
 *
 * <p>{@code pages}: 22 (a 352-token prompt, the paced QUERY of {@code bin/bench-manager} and the
 * TTFT benchmark's hits) and 1024 (its tight-loop QUERY). 16-token pages, one state group.
 *
 * <p>Run (one fork, 3 × 1 s warm-up and 5 × 1 s measured per method and size, about 40 s):
 * <pre>
 *   ./mvnw -B -q -pl orbitkv-bench -am -DskipTests package
 *   java -cp orbitkv-bench/target/orbitkv-bench.jar org.openjdk.jmh.Main QueryFrameBench
 * </pre>
 *
 * <p>Thread model: JMH's; the state is built once per trial and only read by the benchmark
 * methods (the encoder and decoder are stateless), so {@code -t N} is safe.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class QueryFrameBench {

    static final int PAGE_TOKENS = 16;
    static final byte[] NO_EXTRA = new byte[0];

    @Param({"22", "1024"})
    public int pages;

    private byte[] namespaceDigest;
    private int[] tokens;
    private Request.Query query;
    private ByteBuffer frame;
    private FrameDecoder decoder;

    @Setup
    public void setUp() {
        namespaceDigest = new byte[32];
        Arrays.fill(namespaceDigest, (byte) 7);
        tokens = new int[pages * PAGE_TOKENS + 1]; // the final token is always computed
        for (int i = 0; i < tokens.length; i++) tokens[i] = 1000 + i;
        List<byte[]> hashes = List.of(TokenChain.pageHashes(namespaceDigest, tokens, PAGE_TOKENS, NO_EXTRA));
        query = new Request.Query(1, 0, CompletionTarget.HOST_READY, tokens.length, 0, 0, 0,
                List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.of(hashes))));
        frame = ByteBuffer.wrap(FrameEncoder.toBytes(1, query));
        decoder = new FrameDecoder(ProtocolLimits.DEFAULTS, Direction.TO_MANAGER);
        if (!(decoder.decode(frame) instanceof DecodeResult.Decoded d) || !d.frame().equals(query)) {
            throw new IllegalStateException("the QUERY frame does not decode to the query it encodes");
        }
    }

    /** The engine: one chained hash per full page of the prompt. */
    @Benchmark
    public byte[][] pageHashes() {
        return TokenChain.pageHashes(namespaceDigest, tokens, PAGE_TOKENS, NO_EXTRA);
    }

    /** The engine: the QUERY frame's bytes. */
    @Benchmark
    public byte[] encode() {
        return FrameEncoder.toBytes(1, query);
    }

    /** The Manager: the frame checked and decoded (the buffer is not consumed; each call decodes it whole). */
    @Benchmark
    public DecodeResult decode() {
        return decoder.decode(frame);
    }
}
