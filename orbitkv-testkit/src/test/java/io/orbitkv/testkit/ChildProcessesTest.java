package io.orbitkv.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * {@link ChildProcesses}: a JVM stopped by SIGTERM (as Ctrl-C stops a bench) takes its adopted
 * children with it, and a child that exits on its own leaves the set.
 */
class ChildProcessesTest {

    /** A JVM that adopts a long {@code sleep}, prints its pid and waits to be stopped. */
    public static final class Parent {
        public static void main(String[] args) throws Exception {
            Process sleep = ChildProcesses.adopt(new ProcessBuilder("sleep", "300").start());
            System.out.println(sleep.pid());
            System.out.flush();
            Thread.sleep(Duration.ofMinutes(5));
        }
    }

    @Test
    void aJvmStoppedBySigtermStopsItsAdoptedChildren() throws Exception {
        String java = ProcessHandle.current().info().command().orElseThrow();
        Process parent = new ProcessBuilder(List.of(java, "-cp", System.getProperty("java.class.path"), Parent.class.getName()))
                .redirectError(ProcessBuilder.Redirect.DISCARD).start();
        try {
            long childPid;
            try (BufferedReader out = new BufferedReader(new InputStreamReader(parent.getInputStream(), StandardCharsets.UTF_8))) {
                childPid = Long.parseLong(out.readLine().trim());
                Optional<ProcessHandle> child = ProcessHandle.of(childPid);
                assertThat(child).as("the child runs while its parent does").hasValueSatisfying(h -> assertThat(h.isAlive()).isTrue());
                parent.destroy(); // SIGTERM: the JVM runs its shutdown hooks
                assertThat(parent.waitFor(30, TimeUnit.SECONDS)).isTrue();
            }
            Optional<ProcessHandle> child = ProcessHandle.of(childPid);
            if (child.isPresent()) child.get().onExit().get(10, TimeUnit.SECONDS); // gone, or it times out
            assertThat(ProcessHandle.of(childPid).map(ProcessHandle::isAlive).orElse(false)).as("the child stopped").isFalse();
        } finally {
            parent.destroyForcibly();
        }
    }

    @Test
    void aChildThatExitsLeavesTheSet() throws Exception {
        int before = ChildProcesses.adopted();
        Process p = ChildProcesses.adopt(new ProcessBuilder("sleep", "0.2").start());
        assertThat(ChildProcesses.adopted()).isEqualTo(before + 1);
        assertThat(p.waitFor(10, TimeUnit.SECONDS)).isTrue();
        // the removal runs on the JDK's process reaper once the exit is seen: wait for it, bounded
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (ChildProcesses.adopted() != before && System.nanoTime() < deadline) Thread.sleep(5);
        assertThat(ChildProcesses.adopted()).as("an exited child is not kept").isEqualTo(before);
    }
}
