package io.orbitkv.server.peer.bulk;

import io.orbitkv.core.peer.AuthorizeResult.Rejection;
import io.orbitkv.core.peer.NodeIncarnation;
import io.orbitkv.core.peer.PeerMedium;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The bulk wire format: every frame round-trips; every header or body that breaks a limit or a
 * length relation decodes as {@link BulkLayout.Malformed} (never an exception, never an
 * allocation sized by the peer beyond the limit).
 */
class BulkLayoutTest {

    static final BulkLimits LIMITS = BulkLimits.defaults();

    static BulkLayout.PageAsk ask(Random r) {
        byte[] k = new byte[StateKey.BYTES];
        r.nextBytes(k);
        return new BulkLayout.PageAsk(StateKey.ofBytes(k), new NamespaceDigest(r.nextLong(), r.nextLong(), r.nextLong(), r.nextLong()),
                r.nextBoolean() ? PeerMedium.DRAM : PeerMedium.SSD, r.nextLong() & Long.MAX_VALUE, 1 + (r.nextLong() & 0xFFFF_FFFFL));
    }

    static BulkLayout.BatchRequest request(long seed, int pages) {
        Random r = new Random(seed);
        List<BulkLayout.PageAsk> asks = new ArrayList<>();
        for (int i = 0; i < pages; i++) asks.add(ask(r));
        return new BulkLayout.BatchRequest(r.nextLong(), new NodeIncarnation("node-" + r.nextInt(1000), 1 + r.nextInt(1 << 20)),
                1 + r.nextInt(1 << 20), asks);
    }

    /** Splits an encoded frame into its header decode and its body. */
    static BulkLayout.Header header(ByteBuffer frame) {
        return (BulkLayout.Header) BulkLayout.decodeHeader(frame, LIMITS);
    }

    @Property(tries = 200)
    void batchRequestsRoundTrip(@ForAll long seed, @ForAll @IntRange(min = 1, max = 256) int pages) {
        BulkLayout.BatchRequest request = request(seed, pages);
        ByteBuffer frame = request.encode();
        BulkLayout.Header h = header(frame);
        assertThat(h.type()).isEqualTo(BulkLayout.BATCH_REQUEST);
        assertThat(h.bodyBytes()).isEqualTo(frame.remaining());
        assertThat(BulkLayout.decodeRequest(frame, LIMITS)).as("seed %d", seed).isEqualTo(request);
    }

    @Property(tries = 200)
    void aTruncatedOrPaddedRequestIsMalformed(@ForAll long seed, @ForAll @IntRange(min = 1, max = 16) int pages,
                                              @ForAll @IntRange(min = -80, max = 80) int delta) {
        if (delta == 0) return;
        ByteBuffer frame = request(seed, pages).encode();
        header(frame);
        ByteBuffer body = ByteBuffer.allocate(Math.max(0, frame.remaining() + delta));
        ByteBuffer src = frame.slice(frame.position(), Math.min(frame.remaining(), body.capacity()));
        body.put(src).clear();
        assertThat(BulkLayout.decodeRequest(body, LIMITS)).isInstanceOf(BulkLayout.Malformed.class);
    }

    @Test
    void aRequestNamingMorePagesThanTheLimitIsMalformedBeforeItsPagesAreRead() {
        BulkLimits two = new BulkLimits(2, 1 << 20, 1, 1, 1 << 20, 1 << 20, 1 << 20, 1,
                LIMITS.budgetWait(), LIMITS.handshakeTimeout(), LIMITS.batchDeadline());
        assertThat(BulkLayout.decodeHeader(request(1, 5).encode(), two)).as("over the byte limit of 2 pages")
                .isInstanceOf(BulkLayout.Malformed.class);
        ByteBuffer frame = request(1, 3).encode();
        assertThat(BulkLayout.decodeHeader(frame, two)).as("under the byte limit (the node id may be longer)")
                .isInstanceOf(BulkLayout.Header.class);
        assertThat(BulkLayout.decodeRequest(frame, two)).isInstanceOf(BulkLayout.Malformed.class);
    }

    @Property(tries = 200)
    void aBatchIsSpreadOverTheConnectionsInRequestsWithinTheLimit(@ForAll @IntRange(min = 1, max = 5_000) int pages,
                                                                  @ForAll @IntRange(min = 1, max = 8) int connections) {
        BulkLimits limits = LIMITS.withConnectionsPerPeer(connections);
        int parts = BulkPayloadTransport.parts(pages, limits);
        assertThat(parts).isBetween(1, pages);
        assertThat(Math.ceilDiv(pages, parts)).as("largest request").isLessThanOrEqualTo(limits.maxPagesPerBatch());
        if (parts > 1 && parts > Math.ceilDiv(pages, limits.maxPagesPerBatch())) {
            assertThat(parts).as("spread for parallelism: one per connection").isLessThanOrEqualTo(connections);
            assertThat(pages / parts).as("smallest request").isGreaterThanOrEqualTo(BulkPayloadTransport.MIN_PAGES_PER_REQUEST);
        }
        if (pages < 2 * BulkPayloadTransport.MIN_PAGES_PER_REQUEST) assertThat(parts).as("a small batch").isEqualTo(1);
    }

    @Provide
    Arbitrary<Rejection> rejections() {
        return Arbitraries.of(Rejection.class);
    }

    @Property(tries = 100)
    void controlFramesRoundTrip(@ForAll long batchId, @ForAll @IntRange(min = 0, max = 65_535) int index,
                                @ForAll("rejections") Rejection reason) {
        ByteBuffer refused = new BulkLayout.PageRefused(batchId, index, reason).encode();
        assertThat(BulkLayout.decodeControl(header(refused), refused)).isEqualTo(new BulkLayout.PageRefused(batchId, index, reason));
        byte[] nonce = BulkAuth.nonce();
        ByteBuffer hello = new BulkLayout.Hello(nonce).encode();
        assertThat(((BulkLayout.Hello) BulkLayout.decodeControl(header(hello), hello)).serverNonce()).isEqualTo(nonce);
        byte[] mac = BulkAuth.nonce();
        ByteBuffer auth = new BulkLayout.Auth(nonce, mac).encode();
        BulkLayout.Auth a = (BulkLayout.Auth) BulkLayout.decodeControl(header(auth), auth);
        assertThat(a.clientNonce()).isEqualTo(nonce);
        assertThat(a.mac()).isEqualTo(mac);
        ByteBuffer error = new BulkLayout.ErrorFrame(BulkLayout.ErrorCode.AUTH_FAILED).encode();
        assertThat(BulkLayout.decodeControl(header(error), error)).isEqualTo(new BulkLayout.ErrorFrame(BulkLayout.ErrorCode.AUTH_FAILED));
    }

    @Property(tries = 100)
    void pageHeadersRoundTripAndTheirLengthMustMatchTheFrame(@ForAll long batchId, @ForAll @IntRange(min = 0, max = 65_535) int index,
                                                             @ForAll @IntRange(min = 1, max = 64 << 20) int length,
                                                             @ForAll @IntRange(min = 1, max = Integer.MAX_VALUE) int ticket) {
        ByteBuffer frame = new BulkLayout.PageHeader(batchId, index, length, ticket).encode();
        BulkLayout.Header h = header(frame);
        assertThat(h.type()).isEqualTo(BulkLayout.PAGE);
        assertThat(h.bodyBytes()).isEqualTo(BulkLayout.PAGE_HEADER_BYTES + length + BulkLayout.TRAILER_BYTES);
        assertThat(BulkLayout.decodePageHeader(h.bodyBytes(), frame.duplicate()))
                .isEqualTo(new BulkLayout.PageHeader(batchId, index, length, ticket));
        assertThat(BulkLayout.decodePageHeader(h.bodyBytes() + 1, frame.duplicate())).isInstanceOf(BulkLayout.Malformed.class);
    }

    @Test
    void headersOverTheirTypesLimitOrOfUnknownTypeOrVersionAreMalformed() {
        assertThat(BulkLayout.decodeHeader(rawHeader(BulkLayout.PAGE, 1, 0,
                BulkLayout.PAGE_HEADER_BYTES + LIMITS.maxPageBytes() + BulkLayout.TRAILER_BYTES + 1L), LIMITS))
                .isInstanceOf(BulkLayout.Malformed.class);
        assertThat(BulkLayout.decodeHeader(rawHeader(BulkLayout.PAGE, 1, 0, 0xFFFF_FFFFL), LIMITS))
                .isInstanceOf(BulkLayout.Malformed.class);
        assertThat(BulkLayout.decodeHeader(rawHeader(BulkLayout.BATCH_REQUEST, 1, 0, LIMITS.maxRequestBodyBytes() + 1L), LIMITS))
                .isInstanceOf(BulkLayout.Malformed.class);
        assertThat(BulkLayout.decodeHeader(rawHeader(BulkLayout.HELLO, 1, 0, BulkLayout.HELLO_BODY_BYTES + 1L), LIMITS))
                .isInstanceOf(BulkLayout.Malformed.class);
        assertThat(BulkLayout.decodeHeader(rawHeader(0x55, 1, 0, 4), LIMITS)).isInstanceOf(BulkLayout.Malformed.class);
        assertThat(BulkLayout.decodeHeader(rawHeader(BulkLayout.HELLO, 2, 0, BulkLayout.HELLO_BODY_BYTES), LIMITS))
                .isInstanceOf(BulkLayout.Malformed.class);
        assertThat(BulkLayout.decodeHeader(rawHeader(BulkLayout.HELLO, 1, 1, BulkLayout.HELLO_BODY_BYTES), LIMITS))
                .isInstanceOf(BulkLayout.Malformed.class);
        assertThat(BulkLayout.decodeHeader(rawHeader(BulkLayout.HELLO, 1, 0, BulkLayout.HELLO_BODY_BYTES), LIMITS))
                .isEqualTo(new BulkLayout.Header(BulkLayout.HELLO, BulkLayout.HELLO_BODY_BYTES));
    }

    @Property(tries = 500)
    void randomHeadersNeverThrow(@ForAll byte[] bytes) {
        ByteBuffer b = ByteBuffer.wrap(bytes);
        BulkLayout.HeaderDecode d = BulkLayout.decodeHeader(b, LIMITS);
        if (d instanceof BulkLayout.Header h) {
            assertThat(h.bodyBytes()).isBetween(0, BulkLayout.PAGE_HEADER_BYTES + LIMITS.maxPageBytes() + BulkLayout.TRAILER_BYTES);
        }
    }

    @Property(tries = 500)
    void randomRequestBodiesNeverThrow(@ForAll byte[] bytes) {
        assertThat(BulkLayout.decodeRequest(ByteBuffer.wrap(bytes), LIMITS)).isNotNull();
    }

    @Test
    void unknownRefusalCodeIsMalformed() {
        ByteBuffer refused = new BulkLayout.PageRefused(1, 2, Rejection.SOURCE_BUSY).encode();
        refused.put(BulkLayout.HEADER_BYTES + 10, (byte) 99);
        assertThat(BulkLayout.decodeControl(header(refused), refused)).isInstanceOf(BulkLayout.Malformed.class);
    }

    /** Found by the fuzz campaign (target peer): a reserved byte that is not 0 was accepted, so two encodings decoded alike. */
    @Test
    void reservedBitsOfControlFramesMustBeZero() {
        ByteBuffer refused = new BulkLayout.PageRefused(1, 2, Rejection.SOURCE_BUSY).encode();
        refused.put(BulkLayout.HEADER_BYTES + 11, (byte) 1);
        assertThat(BulkLayout.decodeControl(header(refused), refused)).isInstanceOf(BulkLayout.Malformed.class);
        ByteBuffer error = new BulkLayout.ErrorFrame(BulkLayout.ErrorCode.BUSY).encode();
        error.put(BulkLayout.HEADER_BYTES + 3, (byte) 1);
        assertThat(BulkLayout.decodeControl(header(error), error)).isInstanceOf(BulkLayout.Malformed.class);
    }

    /** Found by the fuzz campaign (target peer): invalid UTF-8 in the node id was decoded as U+FFFD, a node nobody sent. */
    @Test
    void aRequesterNodeIdThatIsNotUtf8IsMalformed() {
        ByteBuffer frame = new BulkLayout.BatchRequest(1, new NodeIncarnation("node-x", 2), 3, List.of(ask(new Random(1)))).encode();
        frame.put(BulkLayout.HEADER_BYTES + BulkLayout.REQUEST_FIXED_BYTES + 5, (byte) 0xDE);
        BulkLayout.Header h = header(frame);
        assertThat(BulkLayout.decodeRequest(frame.slice(frame.position(), h.bodyBytes()), LIMITS))
                .isEqualTo(new BulkLayout.Malformed("node id is not UTF-8"));
    }

    static ByteBuffer rawHeader(int type, int version, int flags, long body) {
        ByteBuffer b = ByteBuffer.allocate(BulkLayout.HEADER_BYTES);
        b.put((byte) type).put((byte) version).putShort((short) flags).putInt((int) body);
        return b.flip();
    }
}
