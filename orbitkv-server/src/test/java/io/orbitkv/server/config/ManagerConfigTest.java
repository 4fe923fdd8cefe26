package io.orbitkv.server.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.orbitkv.core.cost.SelectionConfig;
import io.orbitkv.core.storage.TieredStoreConfig;
import io.orbitkv.core.storage.publish.SsdAdmissionPolicy;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.LongRange;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Defaults, the JSON file layer, command-line overrides, refusals with the key's name, and size parsing. */
class ManagerConfigTest {

    @TempDir
    Path dir;

    @Test
    void defaultsDescribeAValidSingleNodeStore() {
        ManagerConfig c = ManagerConfig.defaults();
        assertThat(c.endpoints().socket()).isEqualTo(Path.of("var/orbitkv/manager.sock"));
        assertThat(c.ssd().dir()).isEqualTo(Path.of("var/orbitkv/ssd"));
        assertThat(c.dram().dir().toString()).startsWith("/dev/shm/orbitkv-");
        assertThat(c.endpoints().httpHost()).isEqualTo("127.0.0.1");
        assertThat(c.endpoints().httpPort()).isEqualTo(9464);
        assertThat(c.lockFile()).isEqualTo(Path.of("var/orbitkv/ssd/manager.lock"));
        TieredStoreConfig store = c.storeConfig();
        long dram = store.dram().sizeClasses().stream().mapToLong(s -> s.capacityBytes()).sum();
        assertThat(dram).isLessThanOrEqualTo(1L << 30).isGreaterThan(1L << 29);
        assertThat(store.ssd().fileCount() * store.ssd().fileSizeBytes()).isEqualTo(4L << 30);
        assertThat(store.publish().policy()).isEqualTo(new SsdAdmissionPolicy.WriteThrough());
    }

    @Test
    void catalogReplicasDefaultsToTwoAndIsRefusedOutsideOneToEight() {
        assertThat(ManagerConfig.defaults().cluster().catalogReplicas()).isEqualTo(2);
        assertThat(ManagerConfig.defaults().withOverrides(Map.of("catalogReplicas", "1")).cluster().catalogReplicas()).isEqualTo(1);
        for (String bad : List.of("0", "9")) {
            assertThatThrownBy(() -> ManagerConfig.defaults().withOverrides(Map.of("catalogReplicas", bad)))
                    .isInstanceOf(ConfigException.class).hasMessageContaining("catalogReplicas");
        }
    }

    @Test
    void aFileThenOverridesApplyInOrderAndMoveTheReadyFileWithTheStore() throws IOException {
        Path file = Files.writeString(dir.resolve("m.json"), """
                {"dramBytes": "64m", "ssdBytes": 268435456, "ssdPolicy": "reuse-aware:3",
                 "httpPort": 0, "maxConnections": 8, "dramSlotBytes": ["64k", "2m"]}
                """);
        ManagerConfig c = ManagerConfig.defaults().withJson(file)
                .withOverrides(Map.of("ssdDir", dir.resolve("ssd").toString(), "dramBytes", "32m"));
        assertThat(c.dram().bytes()).isEqualTo(32L << 20);
        assertThat(c.ssd().bytes()).isEqualTo(256L << 20);
        assertThat(c.ssd().writes().policy()).isEqualTo(new SsdAdmissionPolicy.ReuseAware(3));
        assertThat(c.channel().limits().maxConnections()).isEqualTo(8);
        assertThat(c.dram().slotBytes()).containsExactly(64 << 10, 2 << 20);
        assertThat(c.endpoints().readyFile()).isEqualTo(dir.resolve("ssd").resolve("manager.ready").toAbsolutePath());
        assertThat(c.storeConfig().dram().sizeClasses()).hasSize(2);
        assertThat(c.storeConfig().ssd().readPath()).isEqualTo(io.orbitkv.core.storage.ssd.ReadPath.AUTO);
        assertThat(c.withOverrides(Map.of("ssdReadPath", "uring")).storeConfig().ssd().readPath())
                .isEqualTo(io.orbitkv.core.storage.ssd.ReadPath.URING);
    }

    @Test
    void theSmallestDramThatStartsIsDocumentedAndARefusalNamesTheKeysToChange() {
        // Default slot classes (largest 2m) and stagingBytes = dramBytes / 8: 16m is the smallest.
        ManagerConfig smallest = ManagerConfig.defaults().withOverrides(Map.of("dramBytes", "16m"));
        assertThat(smallest.dram().stagingBytes()).isEqualTo(2L << 20);
        assertThat(smallest.storeConfig().dram().reservedBudgetBytes()).isEqualTo(smallest.dram().stagingBytes());
        assertThatThrownBy(() -> ManagerConfig.defaults().withOverrides(Map.of("dramBytes", "15m")))
                .isInstanceOf(ConfigException.class).hasMessageContaining("stagingBytes")
                .hasMessageContaining("16m").hasMessageNotContaining("reservedBudgetBytes");
        assertThat(ManagerConfig.defaults().withOverrides(Map.of("dramBytes", "4m", "stagingBytes", "2m")).storeConfig()
                .dram().reservedBudgetBytes()).as("with stagingBytes set, twice the largest slot starts").isEqualTo(2L << 20);
        assertThatThrownBy(() -> ManagerConfig.defaults().withOverrides(Map.of("dramBytes", "4m", "stagingBytes", "4m")))
                .isInstanceOf(ConfigException.class).hasMessageContaining("stagingBytes").hasMessageContaining("7/8")
                .hasMessageNotContaining("evictedLeasedBudgetBytes");
        Path doc = Path.of("..", "docs", "operations.md");
        assertThat(doc).content().contains("smallest `dramBytes` that starts").contains("reservedBudgetBytes");
    }

    @Test
    void tenantQuotasReadAsJsonOrTextAndABadOneNamesTheKey() throws IOException {
        String ns = "ab".repeat(32);
        assertThat(ManagerConfig.defaults().storeConfig().tenants().isEmpty()).as("none by default").isTrue();
        var text = ManagerConfig.defaults().withOverrides(Map.of("tenantQuotas",
                ns + "/salt-a:dramBytes=2m,dramGuaranteedBytes=1m;" + ns + ":dramBytes=4m,ssdBytes=1g")).storeConfig().tenants();
        assertThat(text.tenants()).hasSize(2);
        assertThat(text.tenants().get(0).label()).contains("salt-a");
        assertThat(text.tenants().get(0).dramBytes()).isEqualTo(2L << 20);
        assertThat(text.tenants().get(0).dramGuaranteedBytes()).isEqualTo(1L << 20);
        assertThat(text.tenants().get(1).label()).isEmpty();
        assertThat(text.tenants().get(1).ssdBytes()).isEqualTo(1L << 30);
        assertThat(text.tenants().get(0).ssdBytes()).isEqualTo(Long.MAX_VALUE);
        Path file = dir.resolve("tenants.json");
        Files.writeString(file, "{\"tenantQuotas\": [{\"namespace\": \"" + ns.toUpperCase()
                + "\", \"tenant\": \"a;b:c\", \"dramBytes\": \"8m\"}]}");
        var json = ManagerConfig.defaults().withJson(file).storeConfig().tenants();
        assertThat(json.tenants()).singleElement().satisfies(q -> {
            assertThat(q.label()).contains("a;b:c");
            assertThat(q.dramBytes()).isEqualTo(8L << 20);
            assertThat(q.namespace().toString()).isEqualTo(ns);
        });
        assertThatThrownBy(() -> ManagerConfig.defaults().withOverrides(Map.of("tenantQuotas", "abc:dramBytes=1m")))
                .isInstanceOf(ConfigException.class).hasMessageContaining("tenantQuotas").hasMessageContaining("64 hex");
        assertThatThrownBy(() -> ManagerConfig.defaults().withOverrides(Map.of("tenantQuotas", ns + ":nvmeBytes=1m")))
                .isInstanceOf(ConfigException.class).hasMessageContaining("unknown tenant budget 'nvmeBytes'");
        assertThatThrownBy(() -> ManagerConfig.defaults().withOverrides(Map.of("dramEviction", "w-tinylfu",
                "tenantQuotas", ns + ":dramGuaranteedBytes=1m"))).isInstanceOf(ConfigException.class)
                .hasMessageContaining("dramEviction=lru");
        assertThatThrownBy(() -> ManagerConfig.defaults().withOverrides(Map.of("tenantQuotas",
                ns + ":dramGuaranteedBytes=2g"))).isInstanceOf(ConfigException.class).hasMessageContaining("exceed");
    }

    @Test
    void twoStoresUnderOneParentHaveDifferentDefaultReadyFiles() {
        ManagerConfig a = ManagerConfig.defaults().withOverrides(Map.of("ssdDir", dir.resolve("a").toString()));
        ManagerConfig b = ManagerConfig.defaults().withOverrides(Map.of("ssdDir", dir.resolve("b").toString()));
        assertThat(a.endpoints().readyFile()).isNotEqualTo(b.endpoints().readyFile());
        assertThat(a.endpoints().readyFile().getParent()).as("next to the store's lock file").isEqualTo(a.lockFile().getParent());
        ManagerConfig explicit = a.withOverrides(Map.of("readyFile", dir.resolve("r").toString(),
                "ssdDir", dir.resolve("c").toString()));
        assertThat(explicit.endpoints().readyFile()).as("a configured ready file stays where it was set")
                .isEqualTo(dir.resolve("r").toAbsolutePath());
    }

    @Test
    void aSmallSsdStoreIsAcceptedWhenTheConfiguredSlotsFitItsFiles() {
        // 4 files of 512 KiB hold 64 KiB pages; only the default 2 MiB slot would not fit
        ManagerConfig c = ManagerConfig.defaults().withOverrides(Map.of("dramSlotBytes", "64k", "ssdBytes", "2m"));
        assertThat(c.storeConfig().ssd().maxPayloadBytes()).isEqualTo(64 * 1024);
        assertThat(c.storeConfig().ssd().fileSizeBytes()).isEqualTo(512 * 1024);
        assertThatThrownBy(() -> ManagerConfig.defaults().withOverrides(Map.of("ssdBytes", "2m")))
                .hasMessageContaining("ssdBytes");
    }

    @Test
    void moreSizeClassesThanOneDescriptorMessageCarriesAreRefusedAtStart() {
        String sizes = java.util.stream.IntStream.rangeClosed(1, 254).mapToObj(i -> (i * 4) + "k")
                .collect(java.util.stream.Collectors.joining(","));
        assertThatThrownBy(() -> ManagerConfig.defaults().withOverrides(Map.of("dramSlotBytes", sizes, "dramBytes", "4g")))
                .hasMessageContaining("dramSlotBytes has 254 sizes; at most 253");
    }

    @Test
    void kvEventsAreOffByDefaultAndTheirEndpointsAreChecked() {
        ManagerConfig c = ManagerConfig.defaults();
        assertThat(c.kvEvents().enabled()).isFalse();
        ManagerConfig on = c.withOverrides(Map.of("kvEventsEndpoint", "tcp://127.0.0.1:5557",
                "kvEventsReplayEndpoint", "tcp://127.0.0.1:5558", "kvEventsReplayBatches", "50"));
        assertThat(on.kvEvents().enabled()).isTrue();
        assertThat(on.kvEvents().settings().replayEndpoint()).isEqualTo("tcp://127.0.0.1:5558");
        assertThat(on.kvEvents().settings().replayBatches()).isEqualTo(50);
        assertThatThrownBy(() -> c.withOverrides(Map.of("kvEventsEndpoint", "ipc:///tmp/kv")))
                .isInstanceOf(ConfigException.class).hasMessageContaining("kvEventsEndpoint must be tcp://host:port");
        assertThatThrownBy(() -> c.withOverrides(Map.of("kvEventsReplayEndpoint", "tcp://127.0.0.1:5558")))
                .isInstanceOf(ConfigException.class).hasMessageContaining("kvEventsReplayEndpoint needs kvEventsEndpoint");
        assertThatThrownBy(() -> c.withOverrides(Map.of("kvEventsEndpoint", "tcp://127.0.0.1:5557",
                "kvEventsNamedBlocks", "0"))).isInstanceOf(ConfigException.class).hasMessageContaining("kvEventsNamedBlocks");
    }

    @Test
    void dramEvictionDefaultsToChainAndReachesTheDramTier() {
        ManagerConfig c = ManagerConfig.defaults();
        assertThat(c.dram().eviction()).isEqualTo(io.orbitkv.core.storage.dram.DramEviction.CHAIN);
        assertThat(c.storeConfig().dram().eviction()).isEqualTo(io.orbitkv.core.storage.dram.DramEviction.CHAIN);
        assertThat(c.withOverrides(Map.of("dramEviction", "w-tinylfu")).storeConfig().dram().eviction())
                .isEqualTo(io.orbitkv.core.storage.dram.DramEviction.W_TINY_LFU);
        assertThat(c.withOverrides(Map.of("dramEviction", "lru")).storeConfig().dram().eviction())
                .isEqualTo(io.orbitkv.core.storage.dram.DramEviction.LRU);
        assertThatThrownBy(() -> c.withOverrides(Map.of("dramEviction", "arc")))
                .isInstanceOf(ConfigException.class).hasMessageContaining("dramEviction")
                .hasMessageContaining("w-tinylfu, lru or chain");
    }

    @Test
    void costSwitchesAreKeysAndTheEnvironmentVariablesAreTheirAliases() {
        ManagerConfig c = ManagerConfig.defaults();
        assertThat(c.cost().costConfig().observationsEnabled()).isFalse();
        assertThat(c.cost().selectionConfig()).isEqualTo(SelectionConfig.off());
        ManagerConfig on = c.withOverrides(Map.of("costObservations", "true", "costSelection", "true"));
        assertThat(on.cost().costConfig().observationsEnabled()).isTrue();
        assertThat(on.cost().selectionConfig()).isEqualTo(SelectionConfig.sameMedium());
        assertThat(c.withOverrides(Map.of("costSelection", "true", "costCrossMediumSelection", "true")).cost()
                .selectionConfig()).as("selection counts only with observations").isEqualTo(SelectionConfig.off());

        Map<String, String> all = Map.of("ORBITKV_COST_OBSERVATIONS", "1", "ORBITKV_COST_SELECTION", "1",
                "ORBITKV_CROSS_MEDIUM_SELECTION", "1");
        ManagerConfig env = c.withEnvironment(all);
        assertThat(env.cost().selectionConfig()).isEqualTo(SelectionConfig.crossMedium());
        assertThat(env.cost().selectionConfig()).isEqualTo(SelectionConfig.fromEnvironment(all));
        assertThat(c.withEnvironment(Map.of("ORBITKV_COST_OBSERVATIONS", "true")).cost().observations())
                .as("an alias is on only when exactly 1").isFalse();
        assertThat(env.withOverrides(Map.of("costObservations", "false")).cost().costConfig().observationsEnabled())
                .as("a later layer overrides the environment").isFalse();
        assertThatThrownBy(() -> c.withOverrides(Map.of("costObservations", "yes")))
                .isInstanceOf(ConfigException.class).hasMessageContaining("key 'costObservations'");
    }

    @Test
    void unknownKeysAndBadValuesAreRefusedNamingTheKey() throws IOException {
        Path typo = Files.writeString(dir.resolve("typo.json"), "{\"ssdByte\": \"4g\"}");
        assertThatThrownBy(() -> ManagerConfig.defaults().withJson(typo))
                .isInstanceOf(ConfigException.class).hasMessageContaining("unknown key 'ssdByte'")
                .hasMessageContaining("ssdBytes");
        Path notJson = Files.writeString(dir.resolve("bad.json"), "{dramBytes: ");
        assertThatThrownBy(() -> ManagerConfig.defaults().withJson(notJson)).hasMessageContaining("not valid JSON");
        Path array = Files.writeString(dir.resolve("array.json"), "[1]");
        assertThatThrownBy(() -> ManagerConfig.defaults().withJson(array)).hasMessageContaining("one JSON object");
        assertThatThrownBy(() -> ManagerConfig.defaults().withOverrides(Map.of("dramBytes", "lots")))
                .hasMessageContaining("key 'dramBytes'").hasMessageContaining("not a size");
        assertThatThrownBy(() -> ManagerConfig.defaults().withOverrides(Map.of("socketMode", "0666")))
                .hasMessageContaining("0600 or 0660");
        assertThatThrownBy(() -> ManagerConfig.defaults().withOverrides(Map.of("dramBytes", "1m")))
                .isInstanceOf(ConfigException.class).hasMessageContaining("slots");
        assertThatThrownBy(() -> ManagerConfig.defaults().withOverrides(Map.of("ssdPolicy", "sometimes")))
                .hasMessageContaining("unknown SSD admission policy");
        assertThatThrownBy(() -> ManagerConfig.defaults().withOverrides(Map.of("ssdReadPath", "cufile")))
                .hasMessageContaining("positional, uring or auto");
        assertThatThrownBy(() -> ManagerConfig.defaults().withJson(dir.resolve("missing.json")))
                .hasMessageContaining("cannot read");
    }

    @Test
    void everyKeyIsDocumentedInOperationsMd() throws IOException {
        Path doc = Path.of("..", "docs", "operations.md");
        String text = Files.readString(doc);
        for (String key : ManagerConfig.KEYS.keySet()) {
            assertThat(text).as("docs/operations.md documents `%s`", key).contains("`" + key + "`");
        }
    }

    @Test
    void sizesParseWithBinarySuffixes() {
        assertThat(ByteSize.parse("4096")).isEqualTo(4096);
        assertThat(ByteSize.parse("64k")).isEqualTo(64 << 10);
        assertThat(ByteSize.parse("512M")).isEqualTo(512L << 20);
        assertThat(ByteSize.parse("4g")).isEqualTo(4L << 30);
        assertThat(ByteSize.parse("4GiB")).isEqualTo(4L << 30);
        assertThat(ByteSize.parse("1t")).isEqualTo(1L << 40);
        for (String bad : List.of("", "g", "-1", "1.5g", "4x", "99999999999999999999")) {
            assertThatThrownBy(() -> ByteSize.parse(bad)).isInstanceOf(IllegalArgumentException.class);
        }
        assertThatThrownBy(() -> ByteSize.parse("9000000000000g")).hasMessageContaining("63 bits");
    }

    @Property(tries = 200)
    void formatThenParseIsTheIdentity(@ForAll @LongRange(min = 0, max = 1L << 50) long bytes) {
        assertThat(ByteSize.parse(ByteSize.format(bytes))).isEqualTo(bytes);
    }

    @Test
    void aFileMayHoldCommentsAndATrailingCommaButNotUnknownKeysInsideThem() throws IOException {
        Path file = Files.writeString(dir.resolve("commented.json"), """
                // a line comment before the object
                {
                  /* a block comment */
                  "dramBytes": "64m", // after a value
                  // "ssdBytes": "1t",
                  "httpPort": 0,
                }
                """);
        ManagerConfig c = ManagerConfig.defaults().withJson(file);
        assertThat(c.dram().bytes()).isEqualTo(64L << 20);
        assertThat(c.endpoints().httpPort()).isZero();
        assertThat(c.ssd().bytes()).as("a commented-out key is not applied").isEqualTo(4L << 30);
        Path typo = Files.writeString(dir.resolve("commented-typo.json"), "{\n  // fine\n  \"ssdByte\": \"4g\",\n}");
        assertThatThrownBy(() -> ManagerConfig.defaults().withJson(typo)).hasMessageContaining("unknown key 'ssdByte'");
    }
}
