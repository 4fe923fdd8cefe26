package io.orbitkv.server.channel;

import java.io.IOException;
import java.io.InputStream;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Connections that connect and never send a byte, reopened as soon as the Manager closes one, so
 * that {@code count} are always open: the abuse a newcomer must be served through. Runs in this
 * process (this uid) on one thread with a selector, or, {@link #asNobody}, as a Python process of
 * the user {@code nobody} (needs root and {@code setpriv}), so the Manager sees another uid.
 */
abstract sealed class SilentFlood implements AutoCloseable {

    /** Opens a flood on a socket. */
    interface Opener {
        SilentFlood open(Path socket) throws IOException;
    }

    /** Connections opened so far, reopenings included. */
    abstract long opened();

    /** Stops the flood and closes its connections. */
    @Override
    public abstract void close() throws IOException;

    /** {@code count} silent connections to {@code socket} from this process, kept up. */
    static SilentFlood inProcess(Path socket, int count) throws IOException {
        return new InProcess(socket, count);
    }

    /** True where {@link #asNobody} can run: as root, with {@code setpriv} and {@code /usr/bin/python3}. */
    static boolean nobodyAvailable() {
        return "root".equals(System.getProperty("user.name")) && Files.isExecutable(Path.of("/usr/bin/setpriv"))
                && Files.isExecutable(Path.of("/usr/bin/python3"));
    }

    /**
     * {@code count} silent connections to {@code socket} from a process of uid 65534, kept up;
     * returns once all are open. The socket and its directory are opened to everyone first.
     */
    static SilentFlood asNobody(Path socket, int count) throws IOException {
        Files.setPosixFilePermissions(socket.getParent(), PosixFilePermissions.fromString("rwxr-xr-x"));
        Files.setPosixFilePermissions(socket, PosixFilePermissions.fromString("rw-rw-rw-"));
        return new Nobody(socket, count);
    }

    private static final class InProcess extends SilentFlood {
        private final Path socket;
        private final Selector selector = Selector.open();
        private final AtomicLong opened = new AtomicLong();
        private final Thread thread;
        private volatile boolean stop;

        InProcess(Path socket, int count) throws IOException {
            this.socket = socket;
            for (int i = 0; i < count; i++) open();
            thread = Thread.ofPlatform().daemon().name("silent-flood").start(this::keepUp);
        }

        private void open() throws IOException {
            SocketChannel c = SocketChannel.open(UnixDomainSocketAddress.of(socket));
            c.configureBlocking(false);
            c.register(selector, SelectionKey.OP_READ);
            opened.incrementAndGet();
        }

        private void keepUp() {
            ByteBuffer sink = ByteBuffer.allocate(4096);
            try {
                while (!stop) {
                    selector.select(100);
                    for (SelectionKey k : selector.selectedKeys()) {
                        SocketChannel c = (SocketChannel) k.channel();
                        int n;
                        try {
                            n = c.read(sink.clear());
                        } catch (IOException e) {
                            n = -1;
                        }
                        if (n < 0) {
                            k.cancel();
                            c.close();
                            if (!stop) open();
                        }
                    }
                    selector.selectedKeys().clear();
                }
            } catch (IOException | RuntimeException e) {
                if (!stop) throw new IllegalStateException("the flood stopped", e);
            }
        }

        @Override
        long opened() {
            return opened.get();
        }

        @Override
        public void close() throws IOException {
            stop = true;
            selector.wakeup();
            try {
                thread.join(5_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            for (SelectionKey k : selector.keys()) k.channel().close();
            selector.close();
        }
    }

    private static final class Nobody extends SilentFlood {
        private static final String SCRIPT = """
                import selectors, socket, sys
                path, count = sys.argv[1], int(sys.argv[2])
                sel = selectors.DefaultSelector()
                opened = 0
                def open_one():
                    global opened
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    s.connect(path)
                    s.setblocking(False)
                    sel.register(s, selectors.EVENT_READ)
                    opened += 1
                for _ in range(count):
                    open_one()
                print("ready", flush=True)
                while True:
                    for key, _ in sel.select(0.1):
                        s = key.fileobj
                        try:
                            data = s.recv(4096)
                        except OSError:
                            data = b""
                        if not data:
                            sel.unregister(s)
                            s.close()
                            open_one()
                """;
        private final Process process;

        Nobody(Path socket, int count) throws IOException {
            process = new ProcessBuilder("/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                    "/usr/bin/python3", "-c", SCRIPT, socket.toString(), Integer.toString(count))
                    .redirectError(ProcessBuilder.Redirect.INHERIT).start();
            InputStream out = process.getInputStream();
            StringBuilder line = new StringBuilder();
            for (int b; (b = out.read()) >= 0 && b != '\n'; ) line.append((char) b);
            if (!line.toString().equals("ready")) {
                process.destroyForcibly();
                throw new IOException("the flood of uid 65534 did not start: " + line);
            }
        }

        @Override
        long opened() {
            return -1;
        }

        @Override
        public void close() {
            process.destroyForcibly();
            try {
                process.waitFor(5, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
