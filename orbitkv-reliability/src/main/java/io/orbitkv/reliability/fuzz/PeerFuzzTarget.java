package io.orbitkv.reliability.fuzz;

import com.google.protobuf.InvalidProtocolBufferException;
import io.orbitkv.core.peer.AuthorizeRequest;
import io.orbitkv.core.peer.AuthorizeResult;
import io.orbitkv.core.peer.NodeIncarnation;
import io.orbitkv.core.peer.PeerMedium;
import io.orbitkv.server.peer.PeerWire;
import io.orbitkv.server.peer.bulk.BulkLayout;
import io.orbitkv.server.peer.bulk.BulkLimits;
import io.orbitkv.server.peer.proto.AuthorizeCall;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;

/**
 * Target {@code peer}: the peer codecs, as a source decodes what a requester sent. The first
 * input byte picks the decoder: 0, an {@code AuthorizeCall} (protobuf) through {@link PeerWire},
 * which is total (a malformed call is {@code Optional.empty()}); 1, a bulk data-plane frame
 * through {@link BulkLayout}'s header, control, request and page-header decoders, whose refusals
 * are {@link BulkLayout.Malformed} values. Documented exception: only
 * {@link InvalidProtocolBufferException} from protobuf parsing. Property: what decodes
 * re-encodes to its bytes (bulk: the encoding is canonical) or decodes back to itself (protobuf).
 *
 * <p>{@link PeerWire}'s entry points are public for this target: the fuzzer drives the code the
 * service runs.
 */
public final class PeerFuzzTarget implements FuzzTarget {

    private static final BulkLimits LIMITS = BulkLimits.defaults();

    @Override
    public void fuzzOne(byte[] input) {
        if (input.length == 0) return;
        byte[] body = FuzzTarget.body(input);
        if ((input[0] & 1) == 0) {
            authorize(body);
        } else {
            bulk(body);
        }
    }

    private static void authorize(byte[] bytes) {
        AuthorizeCall call;
        try {
            call = AuthorizeCall.parseFrom(bytes);
        } catch (InvalidProtocolBufferException e) {
            return;
        }
        Optional<AuthorizeRequest> r = PeerWire.decode(call);
        r.ifPresent(a -> FuzzTarget.check(PeerWire.decode(PeerWire.encode(a)).equals(r), "authorize round trip"));
    }

    private static void bulk(byte[] frame) {
        ByteBuffer in = ByteBuffer.wrap(frame);
        if (!(BulkLayout.decodeHeader(in, LIMITS) instanceof BulkLayout.Header h) || in.remaining() < h.bodyBytes()) return;
        FuzzTarget.check(in.position() == BulkLayout.HEADER_BYTES, "header decode consumed " + in.position());
        byte[] frameBytes = Arrays.copyOf(frame, BulkLayout.HEADER_BYTES + h.bodyBytes());
        ByteBuffer body = in.slice(in.position(), h.bodyBytes());
        BulkLayout.BodyDecode d = switch (h.type()) {
            case BulkLayout.BATCH_REQUEST -> BulkLayout.decodeRequest(body, LIMITS);
            case BulkLayout.PAGE -> BulkLayout.decodePageHeader(h.bodyBytes(), body);
            default -> BulkLayout.decodeControl(h, body);
        };
        switch (d) {
            case BulkLayout.BatchRequest r -> FuzzTarget.check(Arrays.equals(bytes(r.encode()), frameBytes), "batch request round trip");
            case BulkLayout.PageRefused r -> FuzzTarget.check(Arrays.equals(bytes(r.encode()), frameBytes), "page refused round trip");
            case BulkLayout.PageHeader p -> FuzzTarget.check(Arrays.equals(bytes(p.encode()),
                    Arrays.copyOf(frameBytes, BulkLayout.HEADER_BYTES + BulkLayout.PAGE_HEADER_BYTES)), "page header round trip");
            default -> { }
        }
    }

    private static byte[] bytes(ByteBuffer b) {
        byte[] out = new byte[b.remaining()];
        b.duplicate().get(out);
        return out;
    }

    @Override
    public List<Seed> seeds() {
        AuthorizeRequest a = new AuthorizeRequest(new NodeIncarnation("node-b", 2), 3, StateKey.ofBytes(new byte[32]),
                NamespaceDigest.ofBytes(new byte[32]), PeerMedium.SSD, 5, 6);
        BulkLayout.BatchRequest batch = new BulkLayout.BatchRequest(9, new NodeIncarnation("node-b", 2), 3,
                List.of(BulkLayout.PageAsk.of(a), BulkLayout.PageAsk.of(a)));
        byte[] page = bytes(new BulkLayout.PageHeader(9, 1, 4096, 11).encode());
        return List.of(
                new Seed("authorize", FuzzTarget.tagged(0, PeerWire.encode(a).toByteArray())),
                new Seed("batch-request", FuzzTarget.tagged(1, bytes(batch.encode()))),
                new Seed("page-header", FuzzTarget.tagged(1, Arrays.copyOf(page, page.length + 4096 + BulkLayout.TRAILER_BYTES))),
                new Seed("page-refused", FuzzTarget.tagged(1, bytes(new BulkLayout.PageRefused(9, 0,
                        AuthorizeResult.Rejection.values()[0]).encode()))));
    }
}
