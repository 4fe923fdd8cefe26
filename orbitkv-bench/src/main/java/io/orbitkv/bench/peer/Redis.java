package io.orbitkv.bench.peer;

import io.orbitkv.bench.peer.PeerReadBench.Page;
import io.orbitkv.testkit.ChildProcesses;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static io.orbitkv.bench.peer.PeerReadBench.MAX_THREADS;
import static io.orbitkv.bench.peer.PeerReadBench.SIZES;

/**
 * The {@code redis} baseline of {@link PeerReadBench}: a {@code redis-server} child on a free
 * loopback port, loaded with the same pages, and a minimal RESP client with one connection per
 * benchmark thread ({@code GET} of one page, {@code MGET} of a batch; the reply read into a heap
 * array).
 *
 * <p>Thread model: connection and buffer {@code thread} are used only by benchmark thread
 * {@code thread}; {@link #load} runs before any of them starts.
 */
final class Redis implements AutoCloseable {
    final Process process;
    final int port;
    final Socket[] conns = new Socket[MAX_THREADS];
    final byte[][] buffers = new byte[MAX_THREADS][];

    private Redis(Process process, int port) {
        this.process = process;
        this.port = port;
    }

    static Redis start(String binary) throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        Process p = ChildProcesses.adopt(new ProcessBuilder(binary, "--port", Integer.toString(port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--protected-mode", "yes").redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.DISCARD).start());
        Redis r = new Redis(p, port);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (true) {
            try (Socket s = new Socket("127.0.0.1", port)) {
                s.getOutputStream().write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
                if (s.getInputStream().read() == '+') break;
            } catch (IOException e) {
                if (System.nanoTime() > deadline) throw e;
                Thread.onSpinWait();
            }
        }
        return r;
    }

    Socket conn(int thread) throws IOException {
        if (conns[thread] == null) {
            conns[thread] = new Socket("127.0.0.1", port);
            conns[thread].setTcpNoDelay(true);
            buffers[thread] = new byte[SIZES[1]];
        }
        return conns[thread];
    }

    static byte[] command(String... parts) {
        StringBuilder b = new StringBuilder("*").append(parts.length).append("\r\n");
        for (String p : parts) b.append('$').append(p.length()).append("\r\n").append(p).append("\r\n");
        return b.toString().getBytes(StandardCharsets.US_ASCII);
    }

    void load(int size, List<Page> pages) throws IOException {
        Socket s = conn(0);
        OutputStream out = s.getOutputStream();
        InputStream in = s.getInputStream();
        for (int i = 0; i < pages.size(); i++) {
            byte[] value = pages.get(i).bytes();
            String key = "p" + size + ":" + i;
            out.write(("*3\r\n$3\r\nSET\r\n$" + key.length() + "\r\n" + key + "\r\n$" + value.length + "\r\n")
                    .getBytes(StandardCharsets.US_ASCII));
            out.write(value);
            out.write("\r\n".getBytes(StandardCharsets.US_ASCII));
            out.flush();
            if (in.read() != '+') throw new IOException("SET failed");
            while (in.read() != '\n') { /* rest of +OK\r\n */ }
        }
    }

    long get(int thread, int size, int i) throws IOException {
        Socket s = conn(thread);
        s.getOutputStream().write(command("GET", "p" + size + ":" + i));
        InputStream in = s.getInputStream();
        if (in.read() != '$') throw new IOException("not a bulk string");
        int len = 0;
        for (int c = in.read(); c != '\r'; c = in.read()) len = len * 10 + (c - '0');
        in.read();
        byte[] buf = buffers[thread];
        in.readNBytes(buf, 0, len);
        in.read();
        in.read();
        return len;
    }

    /** {@code MGET} of the first {@code n} keys of size class {@code size}: one command, one reply of n bulk strings. */
    long mget(int thread, int size, int n) throws IOException {
        Socket s = conn(thread);
        String[] parts = new String[n + 1];
        parts[0] = "MGET";
        for (int i = 0; i < n; i++) parts[i + 1] = "p" + size + ":" + i;
        s.getOutputStream().write(command(parts));
        InputStream in = s.getInputStream();
        if (in.read() != '*') throw new IOException("not an array");
        while (in.read() != '\n') { /* count */ }
        long total = 0;
        for (int i = 0; i < n; i++) {
            if (in.read() != '$') throw new IOException("not a bulk string");
            int len = 0;
            for (int c = in.read(); c != '\r'; c = in.read()) len = len * 10 + (c - '0');
            in.read();
            in.readNBytes(buffers[thread], 0, len);
            in.read();
            in.read();
            total += len;
        }
        return total;
    }

    @Override
    public void close() {
        for (Socket s : conns) {
            try {
                if (s != null) s.close();
            } catch (IOException ignored) {
                // closing
            }
        }
        process.destroy();
    }
}
