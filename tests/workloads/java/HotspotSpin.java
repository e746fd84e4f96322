// A JVM workload for tests/hotspot.rs: one chain of methods that runs on
// the CPU forever, chosen by the first argument, its thread printing
// "<chain>-tid <kernel tid>" first:
//   main  the main thread: main -> a -> b -> c, c() a loop of arithmetic;
//   sort  thread "sorter": Sorter.run -> sortOnce -> ArrayList.sort (the
//         JDK's TimSort) -> ByLength.compare (its bridge, then itself)
//         -> spin: Java -> JDK -> Java;
//   jni   thread "jni" (with -Dhotspot.jni=<libhotspot_spin_jni.so>):
//         Jni.run -> jniOuter -> callBack (native) -> C, which calls
//         fromNative -> spin in a loop: Java -> C -> Java.
// Interpreted under -Xint; otherwise the JIT compiles the loops with the
// small methods inlined, so the same chains come from compiled frames and
// their inlining scopes.
import java.io.File;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

public class HotspotSpin {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        String chain = args.length > 0 ? args[0] : "main";
        switch (chain) {
            case "sort":
                new Sorter().start();
                break;
            case "jni":
                System.load(System.getProperty("hotspot.jni"));
                new Jni().start();
                break;
            default:
                printTid("main");
                while (true) {
                    a();
                }
        }
        Thread.sleep(Long.MAX_VALUE);
    }

    static void printTid(String chain) {
        try {
            System.out.println(chain + "-tid " + new File("/proc/thread-self").getCanonicalFile().getName());
            System.out.flush();
        } catch (Exception e) {
            throw new RuntimeException(e);
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

    /** The leaf of the sort and jni chains. */
    static void spin(int n) {
        long acc = sink;
        for (int i = 0; i < n; i++) {
            acc = acc * 31 + (i ^ (acc >>> 7));
        }
        sink = acc;
    }

    static void sortOnce() {
        List<String> words = new ArrayList<>(List.of("pear", "fig", "banana", "kiwi", "apple", "plum"));
        words.sort(new ByLength());
        sink += words.get(0).length();
    }

    /** Orders by length, slowly; the JDK calls its bridge compare(Object, Object). */
    static class ByLength implements Comparator<String> {
        @Override
        public int compare(String x, String y) {
            spin(50_000);
            return Integer.compare(x.length(), y.length());
        }
    }

    static class Sorter extends Thread {
        Sorter() {
            super("sorter");
        }

        @Override
        public void run() {
            printTid("sort");
            while (true) {
                sortOnce();
            }
        }
    }

    /** In hotspot_spin_jni.c: calls fromNative() forever. */
    static native void callBack();

    static void jniOuter() {
        callBack();
    }

    static void fromNative() {
        spin(200_000);
    }

    static class Jni extends Thread {
        Jni() {
            super("jni");
        }

        @Override
        public void run() {
            printTid("jni");
            jniOuter();
        }
    }
}
