package io.orbitkv.server.config;

import io.orbitkv.core.engine.ManagerBounds;
import io.orbitkv.core.storage.TieredStoreConfig;
import io.orbitkv.core.storage.dram.DramTierConfig;
import io.orbitkv.core.storage.dram.SizeClass;
import io.orbitkv.core.storage.publish.PublishConfig;
import io.orbitkv.core.storage.ssd.ExtentLayout;
import io.orbitkv.core.storage.ssd.SsdConfig;
import io.orbitkv.server.channel.ChannelServer;
import io.orbitkv.server.channel.DescriptorServer;
import io.orbitkv.state.unix.UnixSocket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Converts the groups of a {@link ManagerConfig} into the settings of the parts they configure:
 * the tiered store, the Manager logic's bounds, the channel and descriptor servers. Each core
 * setting not named by a key keeps the core's default, reached through the core's withers.
 *
 * <p>Stateless. Every refusal names the keys a user sets ({@code stagingBytes}, {@code ssdBytes}),
 * never the tiers' internal names, and says which key to change: {@link ManagerConfig}'s
 * constructor runs the store and bounds conversions, so a bad combination is refused when the
 * configuration is read.
 */
final class ConfigConversions {

    private ConfigConversions() {
    }

    /** The tiered store: DRAM size classes and budgets, the SSD ring, the publish pipeline. */
    static TieredStoreConfig storeConfig(ManagerConfig.Dram dram, ManagerConfig.Ssd ssd, ManagerConfig.Budgets budgets) {
        int largestSlot = dramSlotsChecked(dram.slotBytes());
        DramTierConfig dramTier = dramTier(dram, largestSlot);
        long fileBytes = ssd.bytes() / ssd.files() / 4096 * 4096;
        if (ExtentLayout.footprintBytes(largestSlot) > fileBytes) {
            throw new IllegalArgumentException("ssdBytes " + ByteSize.format(ssd.bytes()) + " over ssdFiles " + ssd.files()
                    + " gives ring files of " + ByteSize.format(fileBytes) + ", too small for one page of the largest"
                    + " dramSlotBytes class (" + ByteSize.format(largestSlot) + " + its extent header): raise"
                    + " ssdBytes, or lower ssdFiles or the largest slot");
        }
        // the payload bound first: a ring file is checked against it, and the default (2 MiB) would
        // refuse a small file that the configured slots fit
        SsdConfig ssdTier = SsdConfig.of(ssd.dir()).withMaxPayloadBytes(largestSlot).withFiles(ssd.files(), fileBytes)
                .withIo(ssd.ioThreads(), 256)
                .withBufferedFallback(ssd.bufferedFallback()).withReadPath(ssd.readPath());
        ManagerConfig.SsdWrites w = ssd.writes();
        PublishConfig publish = PublishConfig.defaults(w.policy())
                .withWriteBudget(w.bytesPerSecond(), w.burstBytes(), w.queueBytes())
                .withDrainTimeoutNanos(TimeUnit.MILLISECONDS.toNanos(budgets.drainTimeoutMillis()));
        return new TieredStoreConfig(dramTier, ssdTier, publish, 65_536, budgets.maxInflightStages())
                .withTenants(budgets.tenantQuotas());
    }

    /** The largest of {@code slotBytes}, after checking there is at least one and not more than one message of descriptors. */
    private static int dramSlotsChecked(List<Integer> slotBytes) {
        if (slotBytes.isEmpty()) throw new IllegalArgumentException("dramSlotBytes needs at least one size");
        if (slotBytes.size() > UnixSocket.MAX_DESCRIPTORS_PER_MESSAGE) {
            // an engine receives one arena descriptor per class in one SCM_RIGHTS message (protocol 6.11)
            throw new IllegalArgumentException("dramSlotBytes has " + slotBytes.size() + " sizes; at most "
                    + UnixSocket.MAX_DESCRIPTORS_PER_MESSAGE
                    + " (one arena descriptor per size goes to an engine in one message)");
        }
        return slotBytes.getLast();
    }

    /**
     * DRAM slots: the largest class gets half of {@code dramBytes}, the others share the rest
     * equally (pages of a 7-8B model at 16 tokens are ~2 MiB; smaller classes serve small models
     * and recurrent checkpoints).
     */
    private static DramTierConfig dramTier(ManagerConfig.Dram dram, int largestSlot) {
        List<Integer> slotBytes = dram.slotBytes();
        long dramBytes = dram.bytes();
        List<SizeClass> classes = new ArrayList<>();
        for (int i = 0; i < slotBytes.size(); i++) {
            long share = slotBytes.size() == 1 ? dramBytes
                    : i == slotBytes.size() - 1 ? dramBytes / 2 : dramBytes / 2 / (slotBytes.size() - 1);
            long count = share / slotBytes.get(i);
            if (count < 1 || count > Integer.MAX_VALUE) {
                throw new IllegalArgumentException("dramBytes " + ByteSize.format(dramBytes) + " gives "
                        + count + " slots of " + ByteSize.format(slotBytes.get(i)) + " (need >= 1)");
            }
            classes.add(new SizeClass(slotBytes.get(i), (int) count));
        }
        long capacity = classes.stream().mapToLong(SizeClass::capacityBytes).sum();
        // stagingBytes is the DRAM tier's reservation budget (reservedBudgetBytes): checked here so
        // the message names the keys a user sets, not the tier's internal names.
        long stagingBytes = dram.stagingBytes();
        if (stagingBytes < largestSlot) {
            throw new IllegalArgumentException("stagingBytes " + ByteSize.format(stagingBytes) + " (default dramBytes / 8)"
                    + " must hold one page of the largest dramSlotBytes class (" + ByteSize.format(largestSlot)
                    + "): raise stagingBytes to at least " + ByteSize.format(largestSlot) + ", or dramBytes to at least "
                    + ByteSize.format(8L * largestSlot) + " with the default stagingBytes, or lower the largest slot");
        }
        if (stagingBytes + capacity / 8 >= capacity) {
            throw new IllegalArgumentException("stagingBytes " + ByteSize.format(stagingBytes) + " must be below 7/8 of"
                    + " the DRAM slot capacity (" + ByteSize.format(capacity) + " from dramBytes " + ByteSize.format(dramBytes)
                    + "; the other eighth is kept for evicted pages still being read): lower stagingBytes or raise dramBytes");
        }
        return new DramTierConfig(dram.dir(), dram.arenaName(), classes, stagingBytes, capacity / 8,
                DramTierConfig.DEFAULT_PRESSURE_SCAN_ENTRIES, dram.eviction());
    }

    /**
     * The Manager logic's bounds: {@code maxLeases}, {@code restoreCopyThreads}, the query staging
     * budget (the same {@code stagingBytes} the DRAM tier may hold reserved: a staging reserves
     * its slot there), the fence drain bound ({@code drainTimeoutMillis}) and the publish
     * quarantine ({@code publishQuarantineMillis}), PREPARE's speculation bounds ({@code prepare*});
     * the rest are the core's defaults.
     */
    static ManagerBounds coreBounds(ManagerConfig.Dram dram, ManagerConfig.Budgets budgets) {
        ManagerBounds d = ManagerBounds.DEFAULTS;
        int threads = budgets.restoreCopyThreads();
        return d.withMaxLeases(budgets.maxLeases())
                .withStagingBudgetBytes(dram.stagingBytes())
                .withRestore(threads, Math.max(d.restoreQueuedTasks(), threads))
                .withFenceDrainTimeoutNanos(TimeUnit.MILLISECONDS.toNanos(budgets.drainTimeoutMillis()))
                .withPublishQuarantine(TimeUnit.MILLISECONDS.toNanos(budgets.publishQuarantineMillis()),
                        d.publishQuarantineBytes())
                .withSpeculation(budgets.speculation());
    }

    /** The engine channel's settings; {@code maxUnregisteredConnections} 0 becomes {@code maxConnections / 8}. */
    static ChannelServer.Settings channelSettings(ManagerConfig.Endpoints endpoints, ManagerConfig.Channel channel,
            ManagerConfig.Budgets budgets) {
        int maxConnections = channel.limits().maxConnections();
        int unregistered = channel.maxUnregisteredConnections() == 0
                ? ChannelServer.Settings.defaultMaxUnregistered(maxConnections)
                : channel.maxUnregisteredConnections();
        return new ChannelServer.Settings(endpoints.socket(), endpoints.socketMode(), channel.limits(),
                channel.outboundQueueFrames(), Duration.ofMillis(budgets.drainTimeoutMillis()),
                Duration.ofMillis(channel.registerTimeoutMillis()), unregistered);
    }

    /**
     * The descriptor socket beside the channel socket ({@code <socket>.fd}, protocol §6.11), with
     * the channel socket's mode and one ticket place per connection.
     */
    static DescriptorServer.Settings descriptorSettings(ManagerConfig.Endpoints endpoints, ManagerConfig.Channel channel) {
        return new DescriptorServer.Settings(DescriptorServer.Settings.besideChannel(endpoints.socket()),
                endpoints.socketMode(), channel.limits().maxConnections(), DescriptorServer.Settings.DEFAULT_TICKET_TTL,
                DescriptorServer.Settings.DEFAULT_EXCHANGE_TIMEOUT);
    }
}
