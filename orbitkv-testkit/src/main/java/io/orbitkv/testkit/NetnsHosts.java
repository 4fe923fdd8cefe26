package io.orbitkv.testkit;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * Hosts on one machine: each a Linux network namespace with its own loopback and one address on
 * a private /24, joined by a veth pair to a bridge in the root namespace (which also has an
 * address there, so this JVM reaches every host's listeners). A process runs "on host i" when it
 * is started under {@link #prefix(int)} ({@code ip netns exec NAME}); UNIX sockets and files are
 * shared by all hosts, TCP is not: a Manager's cluster and data planes, etcd and HTTP are reached
 * only over the bridge.
 *
 * <p>Faults: {@link #cut(int)} takes a host's link down (its packets are dropped both ways, its
 * open connections hang as on a pulled cable), {@link #heal(int)} brings it back;
 * {@link #partition(Set)} moves the named hosts to a second bridge, so each side reaches only its
 * own members (and the root namespace reaches only the first side), and {@link #join()} moves
 * them back. Traffic never leaves the machine: the bridges have no uplink.
 *
 * <p>Owns the namespaces, links and bridges it made; {@link #close()} deletes them (a namespace's
 * processes must be stopped first). Thread model: confined to its creator. Requires root and
 * {@code ip} (iproute2): {@link #create} skips the calling test without them, or fails it under
 * {@link Environment#SWITCH}.
 *
 * <p>Design note: names carry a random 4-hex tag and the /24 is {@code 10.213.T.0} with a random
 * {@code T}, so concurrent test JVMs do not collide; interface names stay within Linux's 15
 * characters ({@code okvTTTTb0}, {@code okvTTTTh12}). {@code tc netem} does not work on this
 * kernel, so faults are link state and bridge membership, not delay or loss.
 */
public final class NetnsHosts implements AutoCloseable {

    private static final Path IP = Path.of("/usr/sbin/ip");
    private static final Path IP_ALT = Path.of("/sbin/ip");

    private final String tag;
    private final int subnet;
    private final int hosts;
    private final List<String> made = new ArrayList<>();
    private boolean partitioned;

    private NetnsHosts(String tag, int subnet, int hosts) {
        this.tag = tag;
        this.subnet = subnet;
        this.hosts = hosts;
    }

    /** True when this process runs as root and iproute2 is installed. */
    public static boolean available() {
        return "root".equals(System.getProperty("user.name")) && ipBinary() != null;
    }

    /** Creates {@code hosts} (1..200) hosts on a fresh bridge; see the class comment. */
    public static NetnsHosts create(int hosts) throws IOException {
        Environment.require(available(), "root and iproute2 (ip netns, veth, bridge) for network-namespace hosts");
        if (hosts < 1 || hosts > 200) throw new IllegalArgumentException("hosts must be 1..200: " + hosts);
        ThreadLocalRandom random = ThreadLocalRandom.current();
        NetnsHosts net = new NetnsHosts(String.format("%04x", random.nextInt(0x10000)), random.nextInt(1, 255), hosts);
        try {
            net.build();
        } catch (IOException | RuntimeException e) {
            net.close();
            throw e;
        }
        return net;
    }

    private void build() throws IOException {
        bridge(bridgeName(0));
        ip("addr", "add", rootAddress() + "/24", "dev", bridgeName(0));
        for (int i = 0; i < hosts; i++) {
            String ns = namespace(i);
            ip("netns", "add", ns);
            made.add("netns:" + ns);
            ip("-n", ns, "link", "set", "lo", "up");
            String outside = linkName(i);
            ip("link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", ns);
            made.add("link:" + outside);
            ip("link", "set", outside, "master", bridgeName(0));
            ip("link", "set", outside, "up");
            ip("-n", ns, "addr", "add", address(i) + "/24", "dev", "eth0");
            ip("-n", ns, "link", "set", "eth0", "up");
        }
    }

    private void bridge(String name) throws IOException {
        ip("link", "add", name, "type", "bridge");
        made.add("link:" + name);
        ip("link", "set", name, "up");
    }

    /** Number of hosts. */
    public int size() {
        return hosts;
    }

    /** Host {@code i}'s address ({@code 10.213.T.(i+1)}). */
    public String address(int i) {
        check(i);
        return "10.213." + subnet + "." + (i + 1);
    }

    /** The root namespace's address on the first bridge. */
    public String rootAddress() {
        return "10.213." + subnet + ".254";
    }

    /** The command prefix that runs a command on host {@code i}: {@code ip netns exec NAME}. */
    public List<String> prefix(int i) {
        return List.of(ipBinary().toString(), "netns", "exec", namespace(i));
    }

    /** Takes host {@code i}'s link down: nothing reaches it, nothing leaves it. */
    public void cut(int i) throws IOException {
        ip("link", "set", linkName(i), "down");
    }

    /** Brings host {@code i}'s link back up. */
    public void heal(int i) throws IOException {
        ip("link", "set", linkName(i), "up");
    }

    /**
     * Moves {@code side} to a second bridge: those hosts reach each other only, the rest (and this
     * JVM) reach the rest only. {@link #join()} undoes it.
     */
    public void partition(Set<Integer> side) throws IOException {
        if (partitioned) throw new IllegalStateException("already partitioned");
        if (!made.contains("link:" + bridgeName(1))) bridge(bridgeName(1));
        for (int i : side) ip("link", "set", linkName(i), "master", bridgeName(1));
        partitioned = true;
    }

    /** Ends a {@link #partition}: every host is on the first bridge again. */
    public void join() throws IOException {
        for (int i = 0; i < hosts; i++) ip("link", "set", linkName(i), "master", bridgeName(0));
        partitioned = false;
    }

    /** Deletes every namespace, link and bridge made, newest first; failures are ignored (best effort). */
    @Override
    public void close() {
        for (int k = made.size() - 1; k >= 0; k--) {
            String what = made.get(k);
            try {
                if (what.startsWith("netns:")) ip("netns", "delete", what.substring(6));
                else ip("link", "delete", what.substring(5));
            } catch (IOException | RuntimeException e) {
                // a veth is gone with its namespace; anything else left is named by the next create's failure
            }
        }
        made.clear();
    }

    private String namespace(int i) {
        check(i);
        return "okv" + tag + "-" + i;
    }

    private String linkName(int i) {
        check(i);
        return "okv" + tag + "h" + i;
    }

    private String bridgeName(int b) {
        return "okv" + tag + "b" + b;
    }

    private void check(int i) {
        if (i < 0 || i >= hosts) throw new IndexOutOfBoundsException("host " + i + " of " + hosts);
    }

    private static Path ipBinary() {
        if (Files.isExecutable(IP)) return IP;
        return Files.isExecutable(IP_ALT) ? IP_ALT : null;
    }

    private static void ip(String... args) throws IOException {
        List<String> command = new ArrayList<>();
        command.add(ipBinary().toString());
        command.addAll(List.of(args));
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        try {
            if (!p.waitFor(10, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new IOException("timed out: " + String.join(" ", command));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            p.destroyForcibly();
            throw new IOException("interrupted: " + String.join(" ", command), e);
        }
        if (p.exitValue() != 0) {
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
            throw new IOException(String.join(" ", command) + " exited " + p.exitValue() + ": " + out);
        }
    }
}
