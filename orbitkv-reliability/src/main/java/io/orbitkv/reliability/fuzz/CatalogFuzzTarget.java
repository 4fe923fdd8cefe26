package io.orbitkv.reliability.fuzz;

import com.google.protobuf.InvalidProtocolBufferException;
import io.orbitkv.core.catalog.Holder;
import io.orbitkv.core.catalog.KeyLocation;
import io.orbitkv.core.catalog.Member;
import io.orbitkv.core.catalog.PushBatch;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.server.cluster.CatalogCodec;
import io.orbitkv.server.cluster.proto.KeyResult;
import io.orbitkv.server.cluster.proto.LiveMember;
import io.orbitkv.server.cluster.proto.LookupReply;
import io.orbitkv.server.cluster.proto.LookupRequest;
import io.orbitkv.server.cluster.proto.PushReply;
import io.orbitkv.server.cluster.proto.PushRequest;
import io.orbitkv.state.StateKey;
import java.util.ArrayList;
import java.util.List;

/**
 * Target {@code catalog}: the catalog's wire codec ({@link CatalogCodec}) behind protobuf
 * parsing, as the catalog service and its client decode what a peer sent. The first input byte
 * picks the message (0 PushRequest, 1 PushReply, 2 LookupRequest, 3 LookupReply); the rest is
 * its protobuf encoding. Documented refusals: {@link InvalidProtocolBufferException} from
 * parsing, {@link IllegalArgumentException} from the codec (answered INVALID_ARGUMENT). Property:
 * a decoded value encodes and decodes back to itself.
 *
 * <p>The codec's entry points are public for this target: the fuzzer drives the code the service
 * runs, not a copy.
 */
public final class CatalogFuzzTarget implements FuzzTarget {

    @Override
    public void fuzzOne(byte[] input) {
        if (input.length == 0) return;
        byte[] body = FuzzTarget.body(input);
        try {
            switch (Byte.toUnsignedInt(input[0]) % 4) {
                case 0 -> {
                    PushBatch b = CatalogCodec.batch(PushRequest.parseFrom(body));
                    FuzzTarget.check(CatalogCodec.batch(CatalogCodec.request(b)).equals(b), "push batch round trip");
                }
                case 1 -> {
                    PushBatch.Reply r = CatalogCodec.reply(PushReply.parseFrom(body));
                    FuzzTarget.check(CatalogCodec.reply(CatalogCodec.reply(r)).equals(r), "push reply round trip");
                }
                case 2 -> {
                    LookupRequest r = LookupRequest.parseFrom(body);
                    for (var k : r.getKeysList()) CatalogCodec.key(k);
                    for (LiveMember m : r.getLiveList()) {
                        Member member = CatalogCodec.live(m);
                        FuzzTarget.check(CatalogCodec.live(CatalogCodec.live(member)).equals(member), "live member round trip");
                    }
                }
                default -> {
                    for (KeyResult k : LookupReply.parseFrom(body).getResultsList()) {
                        KeyLocation loc = CatalogCodec.location(k);
                        FuzzTarget.check(CatalogCodec.location(CatalogCodec.result(loc)).equals(loc), "key result round trip");
                    }
                }
            }
        } catch (InvalidProtocolBufferException | IllegalArgumentException e) {
            // the documented refusals
        }
    }

    @Override
    public List<Seed> seeds() {
        StateKey key = StateKey.ofBytes(new byte[32]);
        List<ResidencyEvent> deltas = new ArrayList<>();
        deltas.add(new ResidencyEvent(1, key, ResidencyEvent.Medium.DRAM, ResidencyEvent.Kind.ADDED, 0, 4096));
        deltas.add(new ResidencyEvent(2, key, ResidencyEvent.Medium.SSD, ResidencyEvent.Kind.REMOVED, 0, 0));
        PushBatch batch = new PushBatch("node-a", 3, 4, 1, true, false, 99, deltas);
        LookupRequest lookup = LookupRequest.newBuilder().addKeys(CatalogCodec.key(key))
                .addLive(CatalogCodec.live(new Member("node-a", "-", 3))).setViewDigest(7).build();
        LookupReply reply = LookupReply.newBuilder()
                .addResults(CatalogCodec.result(new KeyLocation.Present(List.of(new Holder("node-a", 3, ResidencyEvent.Medium.SSD, 5, 4096)))))
                .addResults(CatalogCodec.result(new KeyLocation.Absent()))
                .addResults(CatalogCodec.result(new KeyLocation.Unknown(KeyLocation.UnknownReason.values()[0])))
                .setOwnerIncarnation(4).build();
        return List.of(
                new Seed("push-request", FuzzTarget.tagged(0, CatalogCodec.request(batch).toByteArray())),
                new Seed("push-reply", FuzzTarget.tagged(1, CatalogCodec.reply(new PushBatch.Reply(PushBatch.Result.APPLIED, 4)).toByteArray())),
                new Seed("lookup-request", FuzzTarget.tagged(2, lookup.toByteArray())),
                new Seed("lookup-reply", FuzzTarget.tagged(3, reply.toByteArray())));
    }
}
