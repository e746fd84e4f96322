// A JVM workload for tests/hotspot.rs: the main thread runs
// main -> a -> b -> c on the CPU, forever, c() being the leaf (a loop of
// arithmetic, no calls). Interpreted under -Xint; otherwise the JIT
// compiles c() and then the loop in main() with a, b and c inlined, so
// the same chain comes from compiled frames and their inlining scopes.
// It prints the main thread's kernel tid first.
import java.io.File;

public class HotspotSpin {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        System.out.println("main-tid " + new File("/proc/thread-self").getCanonicalFile().getName());
        System.out.flush();
        while (true) {
            a();
        }
    }

    static void a() {
        b();
    }

    static void b() {
        c();
    }

    static void c() {
        long acc = sink;
        for (int i = 0; i < 200_000; i++) {
            acc = acc * 31 + (i ^ (acc >>> 7));
        }
        sink = acc;
    }
}
