package io.orbitkv.server.cli;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.List;
import java.util.function.Consumer;

/**
 * Installs handlers for SIGTERM and SIGINT that replace the JVM's default (which would run the
 * shutdown hooks and exit 143): the Manager drains, closes and exits 0 on its own thread.
 *
 * <p>Design note: the handler API is {@code sun.misc.Signal} in {@code jdk.unsupported}, the only
 * way a Java program handles a signal. It is reached by reflection because javac's "internal
 * proprietary API" warning on a direct reference cannot be suppressed, and the build compiles with
 * {@code -Werror}. A JDK without the module fails the start with a clear message rather than
 * silently keeping the default behaviour.
 */
final class StopSignals {

    private StopSignals() {}

    /** Calls {@code onSignal} with the signal's name ("TERM", "INT") on the JVM's signal thread. */
    static void install(List<String> names, Consumer<String> onSignal) {
        try {
            Class<?> signal = Class.forName("sun.misc.Signal");
            Class<?> handler = Class.forName("sun.misc.SignalHandler");
            Method getName = signal.getMethod("getName");
            Object proxy = Proxy.newProxyInstance(handler.getClassLoader(), new Class<?>[] {handler}, (self, method, args) -> {
                if (method.getName().equals("handle") && args != null && args.length == 1) {
                    onSignal.accept((String) getName.invoke(args[0]));
                    return null;
                }
                return switch (method.getName()) {
                    case "hashCode" -> System.identityHashCode(self);
                    case "equals" -> self == args[0];
                    case "toString" -> "orbitkv stop-signal handler";
                    default -> throw new UnsupportedOperationException(method.getName());
                };
            });
            Method handle = signal.getMethod("handle", signal, handler);
            for (String name : names) {
                handle.invoke(null, signal.getConstructor(String.class).newInstance(name), proxy);
            }
        } catch (ClassNotFoundException | NoSuchMethodException | IllegalAccessException | InstantiationException e) {
            throw new IllegalStateException("this JDK cannot install signal handlers (jdk.unsupported missing): " + e, e);
        } catch (InvocationTargetException e) {
            throw new IllegalStateException("cannot handle a stop signal: " + e.getCause(), e.getCause());
        }
    }
}
