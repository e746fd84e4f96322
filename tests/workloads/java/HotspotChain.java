// A JVM workload with known Java frames, for crates/interpreters/tests/hotspot_live.rs.
//
// The main thread parks in a() -> b() -> c() -> Thread.sleep; a second thread
// ("hot-worker") calls hot() in a loop between short sleeps (pause()), so that
// hot() and the loop in work() get compiled, with pause() inlined. A third
// ("sorter") sorts a list whose comparator pauses: Java -> JDK -> Java. With
// -Dhotspot.jni=<libhotspot_chain_jni.so>, a fourth ("jni") calls C that calls
// back into Java: Java -> C -> Java. Each thread prints its kernel tid first.
// The "line:" markers tell the test which source line each frame is at.
import java.io.File;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

public class HotspotChain {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        new Worker().start();
        new Sorter().start();
        String jni = System.getProperty("hotspot.jni");
        if (jni != null) {
            System.load(jni);
            new Jni().start();
        }
        System.out.println("main-tid " + tid());
        a(); // line:main
    }

    /** The calling thread's kernel tid (/proc/thread-self is /proc/PID/task/TID). */
    static String tid() throws Exception {
        return new File("/proc/thread-self").getCanonicalFile().getName();
    }

    static void a() throws Exception {
        b(); // line:a
    }

    static void b() throws Exception {
        c(); // line:b
    }

    static void c() throws Exception {
        Thread.sleep(600_000); // line:c
    }

    static long hot(long x) {
        return x * 31 + (x >>> 3);
    }

    static void work() throws Exception {
        long acc = 0;
        while (true) {
            for (int i = 0; i < 100_000; i++) {
                acc += hot(i);
            }
            sink = acc;
            pause(5); // line:work
        }
    }

    /** Small enough to be inlined into work() once that is compiled. */
    static void pause(long millis) throws Exception {
        Thread.sleep(millis); // line:pause
    }

    /** In hotspot_chain_jni.c: calls fromNative(). */
    static native void callBack();

    static void jniOuter() {
        callBack(); // line:jniOuter
    }

    static void fromNative() throws Exception {
        pause(600_000); // line:fromNative
    }

    static class Jni extends Thread {
        Jni() {
            super("jni");
            setDaemon(true);
        }

        @Override
        public void run() {
            try {
                System.out.println("jni-tid " + tid());
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
            jniOuter(); // line:jni
        }
    }

    static void sortOnce() throws Exception {
        List<String> words = new ArrayList<>(List.of("pear", "fig", "banana", "kiwi", "apple", "plum"));
        words.sort(new ByLength()); // line:sortOnce
        sink += words.get(0).length();
    }

    /**
     * Orders by length, slowly: the sorter thread sleeps inside compare(). The JDK calls the
     * synthetic bridge compare(Object, Object), whose line is the class's.
     */
    static class ByLength implements Comparator<String> { // line:bridge
        @Override
        public int compare(String x, String y) {
            try {
                pause(1); // line:compare
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
            return Integer.compare(x.length(), y.length());
        }
    }

    static class Sorter extends Thread {
        Sorter() {
            super("sorter");
            setDaemon(true);
        }

        @Override
        public void run() {
            try {
                System.out.println("sorter-tid " + tid());
                while (true) {
                    sortOnce(); // line:sorter
                }
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }
    }

    static class Worker extends Thread {
        Worker() {
            super("hot-worker");
            setDaemon(true);
        }

        @Override
        public void run() {
            try {
                System.out.println("worker-tid " + tid());
                work(); // line:run
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }
    }
}
