package io.orbitkv.reliability;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Entry point of {@code bin/reliability}: {@code <part> [options]} runs one part of the reliability
 * campaign. Each part is a class with a {@code public static int run(String[] args)} that returns
 * the process exit status (0: every check held).
 *
 * <p>Design note: the parts are looked up by name rather than referenced, so that each lives in its
 * own package, owns its options, and the dispatcher never changes when one is added.
 */
public final class ReliabilityMain {

    /** Part name to the class that runs it, in the order {@code all} runs them. */
    static final Map<String, String> PARTS = parts();

    private static Map<String, String> parts() {
        Map<String, String> parts = new LinkedHashMap<>();
        parts.put("faults", "io.orbitkv.reliability.faults.FaultCampaign");
        parts.put("crash", "io.orbitkv.reliability.crash.CrashLoops");
        parts.put("soak", "io.orbitkv.reliability.soak.Soak");
        parts.put("fuzz", "io.orbitkv.reliability.fuzz.FuzzCampaign");
        return Collections.unmodifiableMap(parts);
    }

    private ReliabilityMain() {}

    public static void main(String[] args) {
        System.exit(dispatch(args));
    }

    static int dispatch(String[] args) {
        if (args.length == 0 || args[0].equals("-h") || args[0].equals("--help")) {
            System.out.println("usage: bin/reliability <part> [options]   (<part> --help for its options)");
            System.out.println("parts: " + String.join(", ", PARTS.keySet()));
            return args.length == 0 ? 2 : 0;
        }
        String className = PARTS.get(args[0]);
        if (className == null) {
            System.err.println("reliability: unknown part '" + args[0] + "'; parts: " + String.join(", ", PARTS.keySet()));
            return 2;
        }
        try {
            Method run = Class.forName(className).getMethod("run", String[].class);
            return (Integer) run.invoke(null, (Object) Arrays.copyOfRange(args, 1, args.length));
        } catch (InvocationTargetException e) {
            throw new IllegalStateException("reliability part " + args[0] + " failed", e.getCause());
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("reliability part " + args[0] + " is not in this jar (" + className + ")", e);
        }
    }
}
